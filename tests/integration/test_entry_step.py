"""Admission as the entry operator's first step (``admission: entry``), through a real
task's epoch (``task.run_group``) on a real broker and redis-server: the entry
operator's replicas read the source topic's partitions themselves. Every record ends
admitted (processed once, by id) or dead-lettered with the reason; the run's ingress
counts and λ_G's ``source`` rows count each record once; each source partition's
watermark reaches the successor from the replica that reads it, idle only once that
replica has read the partition to its end."""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

import orjson
import pytest
import redis
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition

from elastic_sps.io import id_ledger
from elastic_sps.io.connections import kafka_config
from elastic_sps.io.envelope import decode
from elastic_sps.io.kafka_admin import ensure_topics
from elastic_sps.io.knowledge_base import Keys, KnowledgeBase
from elastic_sps.io.watermarks import Declaration, decode_declaration, is_declaration
from elastic_sps.model import topology
from elastic_sps.services.dataplane.admission import check_entry_step
from elastic_sps.services.dataplane.entry_slot import EntryTask
from elastic_sps.services.dataplane.feed import Batch, Feed
from elastic_sps.services.dataplane.group import GroupRun
from elastic_sps.services.dataplane.handover import Acquire, HandOver, Release
from elastic_sps.services.dataplane.job import create_topics
from elastic_sps.services.dataplane.options import SourceOptions
from elastic_sps.services.dataplane.publishing import publish
from elastic_sps.services.dataplane.replica import Replica
from elastic_sps.services.dataplane.slots import Slot
from elastic_sps.services.dataplane.task import run_group
from elastic_sps.settings import DataplaneSettings
from tests.support.records import Record
from tests.support.step_after import step_after

pytestmark = pytest.mark.integration


def entry_doc(source: str) -> dict[str, Any]:
    """The pipeline with ``source`` the orders' topic (id, key and event time by field)."""
    return step_after({"topics": [source], "format": "json", "id": "field:id",
                       "key": "field:key", "time": "field:t"})  # fmt: skip


def entry_pipeline(
    tag: str, bootstrap: str, redis_url: str, folder: Any, **settings: Any
) -> tuple[str, DataplaneSettings, Any]:
    """A fresh entry pipeline's source topic, settings (``settings`` over the defaults
    here) and topology, its topics made."""
    source = f"{tag}.orders"
    path = folder / f"{tag}.yaml"
    path.write_text(yaml.safe_dump({**entry_doc(source), "name": tag}))
    resolved = DataplaneSettings(
        kafka_bootstrap_servers=bootstrap, redis_url=redis_url, key_prefix=tag,
        admission="entry", task_window_s=60.0,
        topics={"deadletter": f"{tag}.dead", "metrics": f"{tag}.metrics"}, **settings,
    )  # fmt: skip
    topo = topology.load(path)
    create_topics(resolved, topo)
    return source, resolved, topo


def raw_records(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, bytes]]:
    """Every record of ``topic`` as (partition, value), read to each partition's end."""
    consumer = Consumer(kafka_config(bootstrap, **{"group.id": f"t{uuid.uuid4().hex[:6]}"}))
    ends = {
        j: consumer.get_watermark_offsets(TopicPartition(topic, j), 10)[1]
        for j in range(partitions)
    }
    consumer.assign([TopicPartition(topic, j, 0) for j in range(partitions)])
    out, deadline = [], time.monotonic() + 30
    got = dict.fromkeys(range(partitions), 0)
    while any(got[j] < ends[j] for j in got) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error() is not None:
            continue
        got[msg.partition()] = msg.offset() + 1
        out.append((msg.partition(), msg.value()))
    consumer.close()
    return out


class Watch:
    """The step's declarations as successor partition 0 reads them, live: the last one
    of each entry partition."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = Consumer(
            kafka_config(bootstrap, **{"group.id": f"w{uuid.uuid4().hex[:6]}"})
        )
        self.consumer.assign([TopicPartition(topic, 0, 0)])
        self.last: dict[int, tuple[float | None, bool]] = {}

    def now(self) -> dict[int, tuple[float | None, bool]]:
        while (msg := self.consumer.poll(0.05)) is not None:
            if msg.error() is None and is_declaration(msg.value()):
                d = decode_declaration(msg.value())
                if d.src == "step":
                    self.last[d.part] = (d.wm, d.idle)
        return dict(self.last)


def wait_until(check: Any, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def produce(bootstrap: str, topic: str, partition: int, times: list[int], *raw: bytes) -> None:
    """Orders at event times ``times`` (their ids o<t>), then the ``raw`` records."""
    producer = Producer(kafka_config(bootstrap, **{"enable.idempotence": True}))  # in order
    for t in times:
        body = orjson.dumps({"id": f"o{t}", "key": f"k{t % 2}", "t": t, "sum": t})
        producer.produce(topic, body, partition=partition)
    for body in raw:
        producer.produce(topic, body, partition=partition)
    producer.flush(10)


@pytest.fixture(scope="module")
def entry_run(kafka_bootstrap: str, redis_url: str, tmp_path_factory: Any) -> dict[str, Any]:
    """One epoch of the entry operator's two partitions, both owned by replica 0: the
    records there at its start; once both partitions are idle, two more on partition 0;
    once that one is idle again, a resize ends the epoch."""
    tag = f"en{uuid.uuid4().hex[:6]}"
    source = f"{tag}.orders"
    doc = entry_doc(source)
    path = tmp_path_factory.mktemp("entry") / "entry.yaml"
    path.write_text(yaml.safe_dump({**doc, "name": tag}))
    topics = {"deadletter": f"{tag}.dead", "metrics": f"{tag}.metrics"}
    settings = DataplaneSettings(
        kafka_bootstrap_servers=kafka_bootstrap, redis_url=redis_url, key_prefix=tag,
        admission="entry", idle_s=1.0, track_ids=True, task_window_s=60.0, topics=topics,
    )  # fmt: skip
    topo = topology.load(path)
    check_entry_step(topo, settings.task_window_s)
    create_topics(settings, topo)  # the source with a partition per entry replica: 2
    ensure_topics(kafka_bootstrap, list(topics.values()))
    # partition 0: five orders and a record that is not JSON; partition 1: three orders
    produce(kafka_bootstrap, source, 0, [10, 11, 12, 13, 14], b"not json")
    produce(kafka_bootstrap, source, 1, [20, 21, 22])
    r = redis.Redis.from_url(redis_url)

    def later() -> None:
        watch = Watch(kafka_bootstrap, Keys(tag).topic("after"))
        idle = {0: (14.0, True), 1: (22.0, True)}
        wait_until(lambda: watch.now() == idle, "both partitions idle")
        produce(kafka_bootstrap, source, 0, [15, 16])
        wait_until(lambda: watch.now()[0] == (16.0, True), "partition 0 idle again")
        r.set(Keys(tag).active("step"), 2)  # the epoch ends: a resize needs a new task

    feeding = threading.Thread(target=later, daemon=True)
    feeding.start()
    o = SourceOptions.build(settings, topo, ["step"], "none", (source, 2))
    slots = (Slot(0, 0, 0, owner=0), Slot(1, 0, 0, owner=0))
    rows = run_group(o, "step", slots, 1, serve_s=60.0, keyed_active={"step": 1})
    feeding.join(1)
    return {"tag": tag, "rows": rows, "r": r, "o": o}


def test_every_source_record_is_admitted_once_or_dead_lettered(
    entry_run: dict[str, Any], kafka_bootstrap: str
) -> None:
    tag, r = entry_run["tag"], entry_run["r"]
    kb = KnowledgeBase(r, Keys(tag))
    ids = {f"o{t}" for t in (10, 11, 12, 13, 14, 15, 16, 20, 21, 22)}
    assert kb.ingress_counts() == {"received": 11, "admitted": 10, "dead_lettered": 1}
    assert {i.decode() for i in r.smembers(id_ledger.key(tag, "step", "sent"))} == ids
    assert {i.decode() for i in r.smembers(id_ledger.key(tag, "step", "processed"))} == ids
    assert sorted((row.replica, row.end) for row in entry_run["rows"]) == [(0, 8), (1, 3)]
    # the successor got each admitted event once, with the source's id and LAS key
    events = [
        decode(v) for _, v in raw_records(kafka_bootstrap, Keys(tag).topic("after"), 2)
        if not is_declaration(v)
    ]  # fmt: skip
    assert sorted(e.id for e in events) == sorted(ids)
    dead = raw_records(kafka_bootstrap, f"{tag}.dead", 1)
    assert len(dead) == 1
    letter = json.loads(dead[0][1])
    assert letter["service"] == "ingress" and letter["reason"].startswith("ingress: ")


def test_lambda_g_counts_each_record_once_by_arrival(
    entry_run: dict[str, Any], kafka_bootstrap: str
) -> None:
    rows = [
        json.loads(v) for _, v in raw_records(kafka_bootstrap, f"{entry_run['tag']}.metrics", 1)
    ]
    source = [row for row in rows if row["operator"] == "source"]
    assert sum(row["processed"] for row in source) == 11


def test_each_partition_declares_as_its_reader_sees_it(
    entry_run: dict[str, Any], kafka_bootstrap: str
) -> None:
    records = raw_records(kafka_bootstrap, Keys(entry_run["tag"]).topic("after"), 2)
    # what successor partition 0 read, in order: the step's declarations and events
    seen: list[Declaration | str] = [
        decode_declaration(v) if is_declaration(v) else decode(v).id for j, v in records if j == 0
    ]
    mine = [d for d in seen if isinstance(d, Declaration) and d.src == "step"]
    assert {d.of for d in mine} == {2}  # the source's partitions, not the pool
    # the task's partitions declared active before any of its events
    first = next(k for k, d in enumerate(seen) if isinstance(d, str))
    opening = {d.part: d.idle for d in seen[:first] if isinstance(d, Declaration)}
    assert opening == {0: False, 1: False}
    last = {d.part: d for d in mine}
    assert (last[0].wm, last[0].idle) == (16.0, True)
    assert (last[1].wm, last[1].idle) == (22.0, True)
    # before the first of the records that woke partition 0: partition 1, idle until
    # then, declared active again at its watermark, and partition 0 active
    woke = seen.index("o15")
    before = [d for d in seen[:woke] if isinstance(d, Declaration) and d.src == "step"]
    last_before = {d.part: d for d in before}
    assert (last_before[1].wm, last_before[1].idle) == (22.0, False)
    assert (last_before[0].wm, last_before[0].idle) == (14.0, False)
    assert any(d.part == 1 and d.idle for d in before)  # it had been idle


def test_a_record_read_again_as_an_epoch_ends_counts_once(entry_run: dict[str, Any]) -> None:
    """Records a reader took as its epoch ended are read again by the next task's planned
    read: counted as arrivals by the first only; the planned ones, once counted, are not
    counted again by a retry."""
    o, r = entry_run["o"], entry_run["r"]
    tag = f"{entry_run['tag']}x"
    o = o.model_copy(update={"settings": o.settings.model_copy(update={"key_prefix": tag})})
    create_topics(o.settings, o.topology())  # where the task's first declarations go
    g = GroupRun(o, "step", 1)
    r.hset(Keys(tag).arrivals_read("step"), mapping={0: 8, 1: 3})  # the last reader's
    planned = {0: [Record(0, at, b"{}") for at in range(6, 10)], 1: [Record(1, 2, b"{}")]}
    EntryTask(g, (Slot(0, 6, 10, owner=0), Slot(1, 2, 3, owner=0))).planned(planned, time.time())
    # one publication of the worker's counts holds them all (added under one lock)
    counts = KnowledgeBase(r, Keys(tag)).ingress_counts
    wait_until(lambda: "received" in counts(), "the planned arrivals counted")
    assert counts() == {"received": 2}  # partition 0's offsets 8 and 9, none of 1's
    assert r.hgetall(Keys(tag).arrivals_read("step")) == {b"0": b"10", b"1": b"3"}


def test_a_resize_hands_source_partitions_over_inside_the_task(
    kafka_bootstrap: str, redis_url: str, tmp_path: Any
) -> None:
    """Replica 0 serves both source partitions; the count goes to 2 while records flow:
    partition 1 moves to replica 1 inside the running task, and every record is processed
    once."""
    tag = f"mv{uuid.uuid4().hex[:6]}"
    source, settings, topo = entry_pipeline(
        tag, kafka_bootstrap, redis_url, tmp_path, track_ids=True
    )
    r = redis.Redis.from_url(redis_url)
    keys, kb = Keys(tag), KnowledgeBase(redis.Redis.from_url(redis_url), Keys(tag))
    r.set(keys.active("step"), 1)
    first = list(range(1000, 1200))
    produce(kafka_bootstrap, source, 0, first[::2])
    produce(kafka_bootstrap, source, 1, first[1::2])

    def later() -> None:
        wait_until(lambda: kb.ingress_counts().get("admitted", 0) >= 50, "records admitted")
        marker = {"plan_id": "t", "from": 1, "to": 2, "decided_at": time.time(), "applied_at": 0}
        r.hset(keys.rescale("step"), mapping=marker)  # the change the move's effect closes
        r.set(keys.active("step"), 2)
        wait_until(lambda: r.hexists(keys.rescale("step"), "effect_at"), "the move")
        second = list(range(2000, 2200))
        produce(kafka_bootstrap, source, 0, second[::2])
        produce(kafka_bootstrap, source, 1, second[1::2])
        wait_until(lambda: kb.ingress_counts().get("admitted", 0) == 400, "all admitted")
        r.set(keys.active("after"), 2)  # the epoch ends (the test's stop)

    feeding = threading.Thread(target=later, daemon=True)
    feeding.start()
    o = SourceOptions.build(settings, topo, ["step"], "none", (source, 2))
    slots = (Slot(0, 0, 0, owner=0), Slot(1, 0, 0, owner=0))
    run_group(o, "step", slots, 1, serve_s=60.0, keyed_active={"after": 1}, moves_in_task=True)
    feeding.join(1)
    processed = {i.decode() for i in r.smembers(id_ledger.key(tag, "step", "processed"))}
    assert processed == {f"o{t}" for t in range(1000, 1200)} | {f"o{t}" for t in range(2000, 2200)}
    assert kb.counts("step")["processed"] == 400  # each once
    assert kb.ingress_counts() == {"received": 400, "admitted": 400}


def test_an_epoch_that_ends_before_its_first_tick_still_declares_what_it_read(
    kafka_bootstrap: str, redis_url: str, tmp_path: Any
) -> None:
    """A burst there before a task starts, all read and handled after the task's short
    epoch is over (a fresh dataplane's first task serves one checkpoint interval): the
    reader declares the burst's watermark as the task ends, so the next task, which reads
    nothing more, declares each partition idle at it, not idle at none (the successor's
    windows would wait for ever)."""
    tag = f"bt{uuid.uuid4().hex[:6]}"
    source, settings, topo = entry_pipeline(tag, kafka_bootstrap, redis_url, tmp_path, idle_s=0.5)
    produce(kafka_bootstrap, source, 0, [10, 11, 12])
    produce(kafka_bootstrap, source, 1, [20])
    o = SourceOptions.build(settings, topo, ["step"], "none", (source, 2))
    burst = (Slot(0, 0, 3, owner=0), Slot(1, 0, 1, owner=0))
    run_group(o, "step", burst, 1, serve_s=0.001, keyed_active={"step": 1})  # over at once
    watch = Watch(kafka_bootstrap, Keys(tag).topic("after"))
    ended = {0: (12.0, False), 1: (20.0, False)}  # said as the task ended
    wait_until(lambda: watch.now() == ended, f"{ended} as the first task ended", 20)
    after = (Slot(0, 3, 3, owner=0), Slot(1, 1, 1, owner=0))
    run_group(o, "step", after, 1, serve_s=2.0, keyed_active={"step": 1})  # reads nothing
    idle = {0: (12.0, True), 1: (20.0, True)}
    wait_until(lambda: watch.now() == idle, f"{idle} after the second", 20)


def test_a_partition_adopted_inside_a_chunk_admits_the_rest_of_that_chunk(
    kafka_bootstrap: str, redis_url: str, tmp_path: Any
) -> None:
    """Replica 1 waits for partitions 0 and 1 from replica 0; before it adopts them, a
    chunk moves partition 1 on to replica 2 and brings partition 0's next records. The
    move adopts both first (partition 1 must arrive before it leaves), so partition 0's
    records in that chunk come to a slot that did not exist when the chunk was read
    ahead: they are admitted and processed all the same, each once."""
    tag = f"ad{uuid.uuid4().hex[:6]}"
    source, settings, topo = entry_pipeline(tag, kafka_bootstrap, redis_url, tmp_path)
    g = GroupRun(SourceOptions.build(settings, topo, ["step"], "none", (source, 2)), "step", 1)
    old, new = Replica(g, 0), Replica(g, 1)
    old.serve_planned([Slot(0, 0, 0, owner=0), Slot(1, 0, 0, owner=0)], {0: [], 1: []})
    to_new = {j: HandOver(j, 1, Feed()) for j in (0, 1)}
    new.take_in([Acquire(to_new[0]), Acquire(to_new[1])])
    old.take_in([Release(to_new[0]), Release(to_new[1])])
    old.commits.settle()  # both handed on: replica 1 may adopt them
    onward = HandOver(1, 2, Feed())
    new.take_in([Release(onward), order_batch(source, 0, [0, 1, 2])])
    new.commits.settle()
    assert (onward.done.is_set(), onward.next_offset) == (True, 0)
    publish(g, new.finish() + old.finish())
    kb = KnowledgeBase(redis.Redis.from_url(redis_url), Keys(tag))
    assert kb.ingress_counts() == {"admitted": 3}  # none received here: no reader ran
    assert kb.counts("step")["processed"] == 3


def order_batch(topic: str, partition: int, offsets: list[int]) -> Batch:
    """Orders at ``offsets`` of a source partition, as its reader hands them on."""
    records = [
        Record(
            partition, n, orjson.dumps({"id": f"o{n}", "key": "k", "t": n, "sum": n}), None, topic
        )
        for n in offsets
    ]
    return Batch(records, time.perf_counter())
