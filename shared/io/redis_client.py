"""The one way every service builds its Redis client: bounded timeouts, so a half-open
connection raises instead of hanging, and redis-py's own ``Retry`` with exponential
backoff for connection errors and timeouts (no hand-written retry loop)."""

from __future__ import annotations

from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from elastic_sps.io.connections import RedisSecurity


def redis_client(url: str, timeout_s: float = 5.0, retries: int = 8) -> Any:
    """A client that retries ``retries`` times (backoff 0.2 s doubling to 2 s: about 11 s
    in all, enough for a redis-server restart) and then raises: the caller's supervisor
    restarts a service whose Redis stays away."""
    return redis.Redis.from_url(
        url,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        health_check_interval=30,
        retry=Retry(ExponentialBackoff(cap=2.0, base=0.1), retries),
        retry_on_error=[RedisConnectionError, RedisTimeoutError],
        **RedisSecurity().client_kwargs(url),
    )
