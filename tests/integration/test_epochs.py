"""A task's epoch (``services/dataplane/replica.py``) through the real per-event steps on a
real redis-server and broker. What must not wait for the epoch's end (30 s by default):
a watermark declaration held back by the sending interval goes out once the interval has
passed, whether or not another record arrives (a sender whose input stopped kept its
successors' windows open until then); a replica whose operator fails the task ends the
epoch at once (the task read on, the failing replica's partitions stalled, until then)."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
import yaml

from elastic_sps.io.envelope import Envelope
from elastic_sps.io.watermarks import Declaration, decode_declaration, is_declaration
from elastic_sps.model import topology
from elastic_sps.pipeline.failures import OperatorFailing
from elastic_sps.services.dataplane.feed import WINDOW_END, Batch, Feed
from elastic_sps.services.dataplane.group import GroupRun
from elastic_sps.services.dataplane.job import create_topics
from elastic_sps.services.dataplane.options import SourceOptions
from elastic_sps.services.dataplane.publishing import publish
from elastic_sps.services.dataplane.replica import (
    STOP_ONLY_CHECK_S,
    Epoch,
    Replica,
    epoch_ends,
    run_windowed,
)
from elastic_sps.services.dataplane.slots import Slot
from elastic_sps.settings import DataplaneSettings
from tests.support.records import Record
from tests.support.step_after import step_after

pytestmark = pytest.mark.integration

DOC = step_after()


class Declared:
    """The declarations a group's producer sends, beside sending them."""

    def __init__(self, g: GroupRun) -> None:
        self.g, self.real = g, g.producer.produce
        self.seen: list[Declaration] = []

    def produce(
        self, topic: str, value: bytes, partition: int | None, key: bytes | None = None
    ) -> None:
        if is_declaration(value):
            self.seen.append(decode_declaration(value))
        self.real(topic, value, partition, key)

    def wait_for(self, wm: float, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(d.wm == wm for d in self.seen):
                return True
            time.sleep(0.05)
        return False


def group_of(doc: dict, name: str, bootstrap: str, redis_url: str, tmp_path: Any) -> GroupRun:
    tag = f"ep{uuid.uuid4().hex[:6]}"
    path = tmp_path / "epoch.yaml"
    path.write_text(yaml.safe_dump({**doc, "name": tag}))
    settings = DataplaneSettings(
        kafka_bootstrap_servers=bootstrap, redis_url=redis_url, key_prefix=tag
    )
    topo = topology.load(path)
    create_topics(settings, topo)  # the partitions the replicas read and declare to
    return GroupRun(SourceOptions.build(settings, topo, [name], "none"), name, 1)


def declared(offset: int, wm: float) -> Batch:
    return Batch([Record(0, offset, Declaration("source", 0, 1, wm).encode())], time.perf_counter())


def test_a_held_back_declaration_goes_out_while_the_feed_is_quiet(
    kafka_bootstrap: str, redis_url: str, tmp_path: Any
) -> None:
    g = group_of(DOC, "step", kafka_bootstrap, redis_url, tmp_path)
    sent = Declared(g)
    g.producer.produce = sent.produce  # type: ignore[method-assign]  # this test's producer
    replica = Replica(g, 0)
    replica.serve_planned([Slot(0, 0, 0, owner=0)], {0: []})
    feed = Feed()
    # the source's watermark twice in a row: the first goes at once, the second is held
    # back by the interval; then nothing more arrives for the rest of a long epoch
    feed.put(declared(0, 10.0))
    feed.put(declared(1, 11.0))
    serving = threading.Thread(
        target=replica.serve_feed, args=(feed, Epoch(time.monotonic() + 60, checkpoint_s=0))
    )
    serving.start()
    try:
        went_while_serving = sent.wait_for(11.0, timeout_s=20)
    finally:
        feed.put(WINDOW_END)
        serving.join(30)
    publish(g, replica.finish())
    assert [d.wm for d in sent.seen if d.src == "step"][:2] == [10.0, 10.0]  # both of after's
    assert went_while_serving, [d.wm for d in sent.seen]


def test_a_replica_whose_operator_fails_ends_the_epoch_at_once(
    kafka_bootstrap: str, redis_url: str, tmp_path: Any
) -> None:
    doc = {
        "operators": [
            {"name": "fails", "code": "tests.support.broken_ops:raises_on_most", "et_ms": 0.1,
             "max_replicas": 1, "on_error": "fail"},
        ],
        "edges": [{"from": "source", "to": "fails"}],
    }  # fmt: skip
    g = group_of(doc, "fails", kafka_bootstrap, redis_url, tmp_path)
    body = Envelope("e1", time.time(), "source", {"n": 1}).encode()  # 1 % 3: raises
    began = time.monotonic()
    with pytest.raises(OperatorFailing, match="fails"):
        run_windowed(g, (Slot(0, 0, 1),), {0: [Record(0, 0, body)]}, began + 60, stop=lambda: False)
    assert time.monotonic() - began < 30  # not at the epoch's end, 60 s on


def test_an_epoch_ends_when_its_dataplane_stops_or_a_keyed_count_changes(
    kafka_bootstrap: str, redis_url: str, tmp_path: Any
) -> None:
    g = group_of(DOC, "step", kafka_bootstrap, redis_url, tmp_path)
    g.r.set(g.keys.active("step"), 1)
    ends = epoch_ends(g, {"step": 1}, "host:1:a")
    assert ends() is False
    g.r.set(g.keys.dataplane_stopping("host:2:b"), 1)  # another holder's (a standby's)
    assert ends() is False
    stop_only = epoch_ends(g, {}, "host:2:b")  # nothing keyed: the stop alone,
    assert stop_only() is True  # asked at once, then at most every STOP_ONLY_CHECK_S
    g.r.delete(g.keys.dataplane_stopping("host:2:b"))
    assert stop_only() is False  # not asked again yet: no round trip
    g.r.set(g.keys.dataplane_stopping("host:2:b"), 1)
    assert stop_only() is False
    time.sleep(STOP_ONLY_CHECK_S)
    assert stop_only() is True
    g.r.set(g.keys.dataplane_stopping("host:1:a"), 1)
    assert ends() is True
    warm_up = epoch_ends(g, {"step": 1}, None)  # a warm-up task: no holder's stop
    assert warm_up() is False
    g.r.set(g.keys.active("step"), 2)
    assert warm_up() is True
    assert epoch_ends(g, {}, None)() is False  # nothing to ask


def test_a_serving_replica_reports_what_it_served_before_it_checkpoints(
    kafka_bootstrap: str, redis_url: str, tmp_path: Any
) -> None:
    # the monitor's queue level counts from the served offset: a level read from the
    # commits alone would count a checkpoint interval of events already processed
    g = group_of(DOC, "step", kafka_bootstrap, redis_url, tmp_path)
    g.r.hset(g.keys.position("step"), "0", 50)  # a replica before this one's, served past
    replica = Replica(g, 0)
    replica.serve_planned([Slot(0, 0, 0, owner=0)], {0: []})
    feed = Feed()
    event = {"key": "a", "sum": 1}
    records = [
        Record(0, i, Envelope(f"e{i}", time.time(), "source", event).encode()) for i in range(3)
    ]
    feed.put(Batch(records, time.perf_counter()))
    serving = threading.Thread(
        target=replica.serve_feed, args=(feed, Epoch(time.monotonic() + 60, checkpoint_s=0))
    )
    serving.start()
    try:
        deadline = time.monotonic() + 20
        while g.r.hget(g.keys.position("step"), "0") != b"3":
            assert time.monotonic() < deadline, g.r.hgetall(g.keys.position("step"))
            time.sleep(0.05)
        assert g.r.hgetall(g.keys.committed("step")) == {}  # no checkpoint yet
    finally:
        feed.put(WINDOW_END)
        serving.join(30)
    publish(g, replica.finish())
