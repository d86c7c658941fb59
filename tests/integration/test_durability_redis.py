"""Durability over a real redis-server: the embedded one keeps keyed state and its
committed offset across a restart, the check reads `appendonly` as the server has it, and
a keyed partition whose commit vanished (Redis lost its data) stops the plan."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from elastic_sps.io import embedded
from elastic_sps.io.durability import StateLostError, redis_durability
from elastic_sps.io.knowledge_base import Keys, KnowledgeBase
from elastic_sps.io.redis_client import redis_client
from elastic_sps.io.state_store import PartitionStore
from elastic_sps.services.dataplane.slots import plan_keyed_slots
from tests.support import servers

pytestmark = [pytest.mark.integration, pytest.mark.embedded]

KEYS = Keys("durability")
OP = "count"


def _commit(r: redis.Redis, partition: int, value: int, next_offset: int) -> None:
    store = PartitionStore(r, KEYS, OP, partition)
    store.put("s", 3, "user-1", value)
    assert store.commit(next_offset, owner=0)


@pytest.fixture
def embedded_redis() -> Iterator[embedded.RedisServer]:
    if servers.mode() != "local":
        pytest.skip("restarts a local redis-server (SPS_TEST_SERVERS=local)")
    try:
        server = embedded.RedisServer().start()
    except embedded.PrerequisiteError as exc:
        pytest.skip(str(exc))
    yield server
    server.close()


def test_the_embedded_redis_keeps_keyed_state_across_a_restart(
    embedded_redis: embedded.RedisServer,
) -> None:
    r = redis_client(embedded_redis.url)  # retries while the restarted server loads
    assert redis_durability(r).durable is True
    _commit(r, partition=1, value=42, next_offset=17)
    embedded_redis.restart()
    store = PartitionStore(r, KEYS, OP, 1)
    assert store.committed == 17
    assert store.get("s", 3, "user-1") == 42
    committed = KnowledgeBase(r, KEYS).committed([OP])[OP]
    slots = plan_keyed_slots({"1": 17}, {"1": 20}, 2, 1, {str(j): v for j, v in committed.items()})
    assert (slots[1].start, slots[1].end) == (17, 20)


@pytest.fixture
def config_client(redis_client: redis.Redis) -> Iterator[redis.Redis]:
    """The session's server, its `appendonly` set back afterwards; skipped where CONFIG
    is refused (a managed Redis)."""
    try:
        before = str(redis_client.config_get("appendonly")["appendonly"])
    except redis.ResponseError as exc:
        pytest.skip(f"CONFIG refused: {exc}")
    yield redis_client
    redis_client.config_set("appendonly", before)
    _wait_rewritten(redis_client)


def _wait_rewritten(r: redis.Redis, timeout_s: float = 10.0) -> None:
    """Turned on, `appendonly` first rewrites the file in a child; a server asked to stop
    meanwhile refuses, which would hold up the session's teardown."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        info = r.info("persistence")
        if not (info["aof_rewrite_in_progress"] or info["aof_rewrite_scheduled"]):
            return
        time.sleep(0.02)


def test_the_check_reads_appendonly_as_the_server_has_it(config_client: redis.Redis) -> None:
    config_client.config_set("appendonly", "no")
    found = redis_durability(config_client)
    assert found.durable is False and "append-only" not in found.description
    config_client.config_set("appendonly", "yes")
    found = redis_durability(config_client)
    assert found.durable is True and "append-only file in" in found.description


def test_a_commit_lost_with_redis_s_data_stops_the_keyed_partition(
    redis_client: redis.Redis,
) -> None:
    _commit(redis_client, partition=0, value=5, next_offset=12)
    redis_client.flushdb()  # what a memory-only Redis's restart does
    committed = KnowledgeBase(redis_client, KEYS).committed([OP])[OP]
    progress = {str(j): v for j, v in committed.items()}
    with pytest.raises(StateLostError, match="keyed operator count: partition 0 "):
        plan_keyed_slots({"0": 12, "1": 0}, {"0": 15, "1": 0}, 2, 1, progress, operator=OP)
