"""Real servers for the tests: a redis-server and a Kafka-protocol broker.

One chooser: an explicit address from the environment wins (REDIS_URL,
KAFKA_BOOTSTRAP_SERVERS); otherwise testcontainers when a Docker engine answers;
otherwise local processes (redis-server, the embedded Tansu broker). The same tests run
against either.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from shared import embedded


def docker_available() -> bool:
    if os.environ.get("ELASTIC_SPS_NO_DOCKER"):
        return False
    try:
        import docker

        docker.from_env(timeout=3).ping()
        return True
    except Exception:
        return False


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    if url := os.environ.get("REDIS_URL"):
        yield url
        return
    if docker_available():
        from testcontainers.redis import RedisContainer

        with RedisContainer("redis:7") as c:
            yield f"redis://{c.get_container_host_ip()}:{c.get_exposed_port(6379)}/0"
        return
    with embedded.redis_server() as url:
        yield url


@contextlib.contextmanager
def kafka_broker() -> Iterator[str]:
    if bootstrap := os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        yield bootstrap
        return
    if docker_available():
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer("confluentinc/cp-kafka:7.6.0").with_kraft() as c:
            yield c.get_bootstrap_server()
        return
    with embedded.kafka_broker() as bootstrap:
        yield bootstrap
