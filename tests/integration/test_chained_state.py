"""Chains that hold state, through the real per-event steps on a real redis-server and
broker: a keyed operator chained into one keyed alike keeps its own state of the head's
key, committed with the head's and the offset, each event's effects once, and an output
whose key is not the head's dead-lettered alone with the reason (the head's effect
stays); a window heading a chain sends each fired window through the members after it,
and a member that raises on one dead-letters that window's result."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
import yaml

from elastic_sps.io.envelope import Envelope
from elastic_sps.io.id_ledger import key as ledger_key
from elastic_sps.io.kafka_io import read_topics
from elastic_sps.io.state_store import PartitionStore
from elastic_sps.io.topics import Topics
from elastic_sps.io.watermarks import Declaration
from elastic_sps.model import topology
from elastic_sps.model.keyed import key_group
from elastic_sps.pipeline.failures import OperatorFailing
from elastic_sps.services.dataplane.committing import checkpoint, cut_results
from elastic_sps.services.dataplane.feed import Batch
from elastic_sps.services.dataplane.group import GroupRun
from elastic_sps.services.dataplane.options import SourceOptions
from elastic_sps.services.dataplane.publishing import publish
from elastic_sps.services.dataplane.replica import Replica
from elastic_sps.services.dataplane.slots import Slot
from elastic_sps.settings import DataplaneSettings
from tests.support.records import Record

pytestmark = pytest.mark.integration

OPS = "tests.support.engine_ops"


def event(offset: int, event_id: str, evt: float, **payload: Any) -> Batch:
    body = Envelope(event_id, time.time(), "source", payload, evt=evt).encode()
    return Batch([Record(0, offset, body)], time.perf_counter())


def declared(offset: int, wm: float) -> Batch:
    return Batch([Record(0, offset, Declaration("source", 0, 1, wm).encode())], time.perf_counter())


def group_of(
    doc: dict, name: str, bootstrap: str, redis_url: str, tmp_path: Any, **settings: Any
) -> GroupRun:
    tag = f"cs{uuid.uuid4().hex[:6]}"
    path = tmp_path / "chain.yaml"
    path.write_text(yaml.safe_dump({**doc, "name": tag}))
    topo = topology.load(path)
    assert name in topo.names
    resolved = DataplaneSettings(
        kafka_bootstrap_servers=bootstrap,
        redis_url=redis_url,
        key_prefix=tag,
        topics=Topics(deadletter=f"{tag}.deadletter"),
        **settings,
    )
    return GroupRun(SourceOptions.build(resolved, topo, [name], "none"), name, 1)


def serve(g: GroupRun, records: list[Batch]) -> None:
    replica = Replica(g, 0)
    replica.serve_planned([Slot(0, 0, 0, owner=0)], {0: []})
    replica.take_in(records)
    publish(g, replica.finish())
    g.producer.flush()


def test_a_keyed_member_keeps_its_state_of_the_heads_key_once_per_event(
    kafka_bootstrap: str, redis_url: str, tmp_path: Any
) -> None:
    out = f"chain-{uuid.uuid4().hex[:6]}"
    doc = {
        "operators": [
            {"name": "sum", "code": f"{OPS}:sum_values", "key": "field:key", "et_ms": 0.1,
             "max_replicas": 2},
            {"name": "relabel", "code": f"{OPS}:relabel", "et_ms": 0.1, "max_replicas": 2},
            {"name": "tally", "code": f"{OPS}:tally", "key": "field:key", "et_ms": 0.1,
             "max_replicas": 2, "output": out},
        ],
        "edges": [{"from": a, "to": b} for a, b in
                  [("source", "sum"), ("sum", "relabel"), ("relabel", "tally")]],
    }  # fmt: skip
    g = group_of(doc, "sum..tally", kafka_bootstrap, redis_url, tmp_path)
    a = {"key": "a"}
    serve(
        g,
        [
            event(0, "e1", 1.0, **a, value=5),
            event(1, "e2", 1.0, **a, value=4),
            event(2, "e2", 1.0, **a, value=4),  # a repeat from upstream: applied once
            event(3, "e3", 1.0, **a, value=4),  # 13: relabelled to "a'", not this key
            event(4, "e4", 1.0, **a, value=1),
        ],
    )
    store = PartitionStore(g.r, g.keys, "sum..tally", 0)
    group = key_group("a", g.op.key_groups)
    assert store.committed == 5
    assert store.get("s", group, "a") == {"sum": 14}  # e3's 13 stays: tally failed alone
    assert store.get("s:tally", group, "a") == {"n": 3, "last": 14}
    topics = read_topics(kafka_bootstrap, [out, g.o.deadletter_topic], quiet_s=1.0)
    assert [(r["id"], r["value"]["n"], r["value"]["last"]) for r in topics[out]] == [
        ("e1", 1, 5),
        ("e2", 2, 9),
        ("e4", 3, 14),
    ]
    (letter,) = topics[g.o.deadletter_topic]  # tally's input: relabel's output of e3
    assert letter["event_id"] == "e3" and letter["error_type"] == "KeyChanged"
    assert '"key":"a\'"' in letter["payload"] and '"sum":13' in letter["payload"]
    assert "set `chain: false` on 'tally'" in letter["reason"]


def test_a_member_is_judged_on_its_own_inputs_not_on_the_heads_fan_out(
    kafka_bootstrap: str, redis_url: str, tmp_path: Any
) -> None:
    """sum_twice makes halves 1 and 2 of each sum; tally_halves refuses half 2 of a sum
    above 10, so it fails 1 of every 2 inputs: with a failure window of 4 and a share of
    0.5 it is not stopped (2 of its last 4, as unchained), though each event fails one
    input; each refused half is dead-lettered under its own id."""
    out = f"chain-{uuid.uuid4().hex[:6]}"
    doc = {
        "operators": [
            {"name": "sum", "code": f"{OPS}:sum_twice", "key": "field:key", "et_ms": 0.1,
             "max_replicas": 2},
            {"name": "tally", "code": f"{OPS}:tally_halves", "key": "field:key", "et_ms": 0.1,
             "max_replicas": 2, "output": out},
        ],
        "edges": [{"from": "source", "to": "sum"}, {"from": "sum", "to": "tally"}],
    }  # fmt: skip
    g = group_of(
        doc, "sum..tally", kafka_bootstrap, redis_url, tmp_path,
        operator_failure_window=4, operator_failure_share=0.5,
    )  # fmt: skip
    serve(g, [event(i, f"e{i}", 1.0, key="a", value=11) for i in range(4)])
    topics = read_topics(kafka_bootstrap, [out, g.o.deadletter_topic], quiet_s=1.0)
    assert [(r["id"], r["value"]["n"]) for r in topics[out]] == [
        ("e0", 1),
        ("e1", 2),
        ("e2", 3),
        ("e3", 4),
    ]
    letters = topics[g.o.deadletter_topic]
    assert [d["event_id"] for d in letters] == ["e0/sum.1", "e1/sum.1", "e2/sum.1", "e3/sum.1"]
    assert [d["reason"].split(" (in")[0] for d in letters] == [
        "ValueError: half 2 of sum 11",
        "ValueError: half 2 of sum 22",
        "ValueError: half 2 of sum 33",
        "ValueError: half 2 of sum 44",
    ]
    store = PartitionStore(g.r, g.keys, "sum..tally", 0)
    group = key_group("a", g.op.key_groups)
    assert store.get("s", group, "a") == {"sum": 44}
    assert store.get("s:tally", group, "a") == {"n": 4, "seen": [1, 1, 1, 1]}


def window_chain(out: str) -> dict:
    return {
        "operators": [
            {"name": "win", "key": "field:k", "window": {"tumbling_s": 10}, "et_ms": 0.1,
             "max_replicas": 2},
            {"name": "busy", "code": f"{OPS}:busy_windows", "et_ms": 0.1, "max_replicas": 2,
             "output": out},
        ],
        "edges": [{"from": "source", "to": "win"}, {"from": "win", "to": "busy"}],
    }  # fmt: skip


def test_a_fired_window_goes_through_its_chain_and_a_failing_one_is_dead_lettered(
    kafka_bootstrap: str, redis_url: str, tmp_path: Any
) -> None:
    out = f"windows-{uuid.uuid4().hex[:6]}"
    g = group_of(window_chain(out), "win..busy", kafka_bootstrap, redis_url, tmp_path)
    keys = ["a", "a", "b", *["d"] * 6, "a"]
    records = [event(i, f"e{i}", 1.0 + i, k=k) for i, k in enumerate(keys[:-1])]
    records.append(declared(9, 10.5))  # closes [0, 10): a counts 2, b 1, d 6
    records.append(event(10, "e10", 11.0, k="a"))  # in the next window, still open
    serve(g, records)
    topics = read_topics(kafka_bootstrap, [out, g.o.deadletter_topic], quiet_s=1.0)
    assert sorted((r["id"], r["value"]["n"], r["value"]["half"]) for r in topics[out]) == [
        ("a@0", 2, 1),
        ("a@0/busy.1", 2, 2),
    ]
    (letter,) = topics[g.o.deadletter_topic]
    assert letter["event_id"] == "d@0" and letter["error_type"] == "ValueError"
    assert "counts 6" in letter["reason"] and '"value":6' in letter["payload"]
    assert PartitionStore(g.r, g.keys, "win..busy", 0).oldest_end() == 20.0


def test_a_member_failing_on_most_windows_stops_the_operator_whatever_the_events(
    kafka_bootstrap: str, redis_url: str, tmp_path: Any
) -> None:
    """Over the last 2 windows (the failure window here), both raising: a bug, not bad
    input, though the window took 12 events without fault (unchained, the member would
    be an operator of its own, judged on the windows it gets)."""
    out = f"windows-{uuid.uuid4().hex[:6]}"
    g = group_of(
        window_chain(out), "win..busy", kafka_bootstrap, redis_url, tmp_path,
        operator_failure_window=2, operator_failure_share=0.5,
    )  # fmt: skip
    records = [event(i, f"e{i}", 1.0 + i % 6, k="ab"[i // 6]) for i in range(12)]
    records.append(declared(12, 10.5))  # a and b each count 6: busy raises on both
    replica = Replica(g, 0)
    replica.serve_planned([Slot(0, 0, 0, owner=0)], {0: []})
    with pytest.raises(OperatorFailing, match="failed on 2 of its last 2"):
        replica.take_in(records)


SUM_ALONE = {
    "operators": [{"name": "sum", "code": f"{OPS}:sum_values", "key": "field:key",
                   "et_ms": 0.1, "max_replicas": 2}],
    "edges": [{"from": "source", "to": "sum"}],
}  # fmt: skip


class DiedAtCommit(Exception):
    """The process dying as it commits a partition's state (``kill -9`` there)."""


def test_the_ledger_marks_are_in_before_the_state_commits(
    kafka_bootstrap: str, redis_url: str, tmp_path: Any
) -> None:
    """A committed event is never read again, so its id ledger marks must be written
    before its commit: a death between them would leave it sent and never processed."""
    g = group_of(SUM_ALONE, "sum", kafka_bootstrap, redis_url, tmp_path, track_ids=True)
    replica = Replica(g, 0)
    replica.serve_planned([Slot(0, 0, 0, owner=0)], {0: []})
    replica.take_in([event(0, "e1", 1.0, key="a", value=5), event(1, "e2", 1.0, key="a", value=4)])
    results = replica.finish()

    def dies(prepared: Any) -> bool:
        raise DiedAtCommit

    for res in results:
        assert res.keyed is not None
        res.keyed.store.apply = dies  # type: ignore[method-assign]
    with pytest.raises(DiedAtCommit):
        publish(g, results)
    assert g.r.smembers(ledger_key(g.keys.prefix, "sum", "processed")) == {b"e1", b"e2"}
    assert PartitionStore(g.r, g.keys, "sum", 0).committed is None  # read again on restart


def test_an_attempt_whose_commit_another_beat_applies_nothing_more(
    kafka_bootstrap: str, redis_url: str, tmp_path: Any
) -> None:
    """Two attempts at one partition's range (a retry beside a task that lives on): the
    first commits e1; the second's commit of e1 is refused, and then it applies nothing,
    so e2 is left to the attempt that owns the partition."""
    g = group_of(SUM_ALONE, "sum", kafka_bootstrap, redis_url, tmp_path, track_ids=True)
    first, second = Replica(g, 0), Replica(g, 0)
    for attempt in (first, second):
        attempt.serve_planned([Slot(0, 0, 0, owner=0)], {0: []})
        attempt.take_in([event(0, "e1", 1.0, key="a", value=5)])
    publish(g, first.finish())
    (run,) = second.runs.values()
    checkpoint(g, [run])
    # fenced at the refusal, before a read tells it (a hand-over would pass the partition
    # on from its uncommitted offset)
    assert run.keyed is not None and run.keyed.fenced
    second.take_in([event(1, "e2", 1.0, key="a", value=4)])
    (late,) = second.finish()
    assert late.processed == 0
    assert g.r.smembers(ledger_key(g.keys.prefix, "sum", "processed")) == {b"e1"}


def test_a_cut_of_an_overtaken_attempt_with_new_windows_stops_the_slot_not_the_replica(
    kafka_bootstrap: str, redis_url: str, tmp_path: Any
) -> None:
    """Another attempt commits the partition; this one's cut holds a window end and has
    never read the committed windows, so taking the cut reads them, fenced: the slot
    stops (nothing of its cut to commit), and the cut does not raise."""
    g = group_of(SUM_ALONE, "sum", kafka_bootstrap, redis_url, tmp_path, track_ids=True)
    replica = Replica(g, 0)
    replica.serve_planned([Slot(0, 0, 0, owner=0)], {0: []})
    replica.take_in([event(0, "e1", 1.0, key="a", value=5)])
    (run,) = replica.runs.values()
    assert PartitionStore(g.r, g.keys, "sum", 0).commit(1, owner=1)  # the other attempt
    run.keyed.store.set_end(0, '["a",0]', 10.0)
    cut = cut_results([run])
    assert cut is not None and cut[0].commit is None
    assert run.keyed.fenced
