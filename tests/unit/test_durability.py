"""Durability said and checked: how Redis keeps its data, the dataplane's word on it at
start, and a keyed partition whose committed offset vanished stopping the plan."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from redis.exceptions import ResponseError

from elastic_sps.io.durability import (
    NotDurableError,
    StateLostError,
    check_keyed_state,
    classify,
    redis_durability,
)
from elastic_sps.model import topology
from elastic_sps.services.dataplane import job
from elastic_sps.services.dataplane.slots import plan_keyed_slots
from elastic_sps.settings import DataplaneSettings

pytestmark = pytest.mark.unit


# -- the plan rule -------------------------------------------------------------------------
def test_a_fresh_run_starts_every_partition_at_zero() -> None:
    slots = plan_keyed_slots({"0": 0, "1": 0}, {"0": 5, "1": 0}, 2, 1, {}, operator="count")
    assert [(s.replica, s.start, s.end) for s in slots] == [(0, 0, 5), (1, 0, 0)]


def test_a_partition_starts_where_its_state_was_committed() -> None:
    slots = plan_keyed_slots({"0": 40, "1": 0}, {"0": 60, "1": 3}, 2, 2, {"0": 50}, "count")
    assert [(s.start, s.end) for s in slots] == [(50, 60), (0, 3)]


def test_a_partition_that_never_got_an_event_needs_no_commit() -> None:
    slots = plan_keyed_slots({"0": 40, "1": 0}, {"0": 40, "1": 0}, 2, 1, {"0": 40}, "count")
    assert [s.start for s in slots] == [40, 0]


def test_a_partition_past_zero_without_a_commit_stops_the_plan_naming_it() -> None:
    with pytest.raises(StateLostError) as lost:
        plan_keyed_slots({"0": 40, "1": 7}, {"0": 60, "1": 9}, 2, 1, {"0": 40}, "count_by_user")
    text = str(lost.value)
    assert "keyed operator count_by_user" in text
    assert "partition 1 (Spark at offset 7)" in text and "partition 0" not in text
    assert "Redis lost the keyed state and its committed offsets" in text
    assert "HSET <SPS_KEY_PREFIX>:dp:count_by_user:committed 1 7" in text  # how to recover
    assert "appendonly yes" in text


def test_every_lost_partition_is_named_at_once() -> None:
    with pytest.raises(StateLostError, match=r"partition 0 .*, partition 2 \(Spark at offset 3\)"):
        plan_keyed_slots({"0": 5, "1": 0, "2": 3}, {}, 3, 1, {}, "count")


def test_without_the_knowledge_base_s_offsets_nothing_is_judged() -> None:
    slots = plan_keyed_slots({"0": 5}, {"0": 8}, 1, 1)
    assert (slots[0].start, slots[0].end) == (5, 8)


# -- how Redis keeps its data --------------------------------------------------------------
@pytest.mark.parametrize(
    ("config", "durable", "said"),
    [
        ({"appendonly": "yes", "appendfsync": "everysec", "dir": "/data"}, True, "/data"),
        ({"appendonly": "yes", "appendfsync": "no", "dir": "/d"}, True, "appendfsync no"),
        ({"appendonly": "no", "save": "3600 1"}, False, "snapshots only (save 3600 1)"),
        ({"appendonly": "no", "save": ""}, False, "memory only"),
        ({}, None, "unknown"),
    ],
)
def test_durability_is_classified_from_config_get(
    config: dict[str, str], durable: bool | None, said: str
) -> None:
    found = classify(config)
    assert found.durable is durable
    assert said in found.description


class FakeRedis:
    """CONFIG GET answered from a dict (bytes, as a client without decoding sees them),
    or refused as a managed Redis does."""

    def __init__(self, config: dict[str, str] | None) -> None:
        self.config, self.asked = config, 0

    def pipeline(self, transaction: bool = True) -> FakeRedis:
        return self

    def config_get(self, name: str) -> None:
        self.asked += 1

    def execute(self) -> list[dict[bytes, bytes]]:
        if self.config is None:
            raise ResponseError("unknown command 'CONFIG'")
        return [{k.encode(): v.encode()} for k, v in self.config.items()]


def test_a_redis_refusing_config_get_has_unknown_durability() -> None:
    found = redis_durability(FakeRedis(None))
    assert found.durable is None and "CONFIG GET refused" in found.description


def test_answers_in_bytes_are_read() -> None:
    found = redis_durability(FakeRedis({"appendonly": "yes", "dir": "/data"}))
    assert found.durable is True and "/data" in found.description


# -- the word at start ---------------------------------------------------------------------
MEMORY = {"appendonly": "no", "save": ""}


def test_a_topology_without_keyed_operators_asks_nothing() -> None:
    r = FakeRedis(MEMORY)
    assert check_keyed_state(r, [], require=True) is None
    assert r.asked == 0


def test_a_memory_only_redis_gets_one_warning_saying_how_to_fix_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO):
        found = check_keyed_state(FakeRedis(MEMORY), ["count"], require=False)
    assert found is not None and found.durable is False
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    text = warnings[0].getMessage()
    assert "keyed state of count will be lost if Redis restarts" in text
    assert "appendonly yes" in text


def test_an_unknown_durability_is_warned_about_too(caplog: pytest.LogCaptureFixture) -> None:
    check_keyed_state(FakeRedis(None), ["count"], require=False)
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert "durability is unknown" in caplog.records[0].getMessage()


def test_a_durable_redis_is_said_once_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    aof = {"appendonly": "yes", "appendfsync": "everysec", "dir": "/data"}
    with caplog.at_level(logging.INFO):
        assert check_keyed_state(FakeRedis(aof), ["count"], require=True) is not None
    assert [r.levelno for r in caplog.records] == [logging.INFO]


@pytest.mark.parametrize("config", [MEMORY, None])
def test_required_durability_refuses_to_start(config: dict[str, str] | None) -> None:
    with pytest.raises(NotDurableError, match="SPS_REQUIRE_DURABLE_STATE is set: not starting"):
        check_keyed_state(FakeRedis(config), ["count"], require=True)


def test_the_dataplane_asks_only_for_its_keyed_operators(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def check(r: Any, stateful: list[str], require: bool) -> None:
        seen.update(stateful=stateful, require=require)

    monkeypatch.setattr("elastic_sps.io.durability.check_keyed_state", check)
    monkeypatch.setattr("elastic_sps.io.redis_client.redis_client", lambda url: FakeRedis(MEMORY))
    monkeypatch.setenv("SPS_REQUIRE_DURABLE_STATE", "true")
    ops = [
        {"name": "parse", "et_ms": 1},
        {"name": "count", "et_ms": 1, "key": "field:k"},
    ]
    edges = [{"from": "source", "to": "parse"}, {"from": "parse", "to": "count"}]
    topo = topology.from_dict({"operators": ops, "edges": edges})
    job.check_durability(DataplaneSettings(), topo)
    assert seen == {"stateful": ["count"], "require": True}
