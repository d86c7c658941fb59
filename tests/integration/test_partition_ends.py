"""The two ways a micro-batch learns partition ends, against the real broker and
redis-server: the producers' registry, and the broker's watermarks (exact here when every
record is its own batch, as on Apache Kafka)."""

from __future__ import annotations

import uuid

import pytest
import redis

from elastic_sps.io.kafka_admin import ensure_topics
from elastic_sps.io.knowledge_base import Keys
from elastic_sps.io.tracked_producer import TrackedProducer
from elastic_sps.model import topology
from elastic_sps.services.dataplane.options import SourceOptions
from elastic_sps.services.dataplane.source import OperatorReader
from elastic_sps.settings import DataplaneSettings

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("source", ["registry", "watermarks"])
def test_the_source_reads_partition_ends_from_the_chosen_place(kafka_bootstrap, redis_url, source):
    keys = Keys("ends" + uuid.uuid4().hex[:6])
    topic = keys.topic("parse")  # the twitter topology's entry: a pool of 8
    ensure_topics(kafka_bootstrap, [topic], partitions=8)
    r = redis.Redis.from_url(redis_url)
    tracked = TrackedProducer(kafka_bootstrap, r, keys, **{"batch.num.messages": 1})
    for k in range(7):  # partitions 0, 1, 2 get 3, 2, 2 records
        tracked.produce(topic, f"e{k}".encode(), partition=k % 3)
    tracked.flush()
    topo = topology.load("twitter")
    settings = DataplaneSettings(
        kafka_bootstrap_servers=kafka_bootstrap,
        redis_url=redis_url,
        key_prefix=keys.prefix,
        partition_ends=source,
    )
    reader = OperatorReader(SourceOptions.build(settings, topo, ["parse"], "none"))
    assert reader._read().ends == {"parse": [3, 2, 2, 0, 0, 0, 0, 0]}
    if source == "watermarks":  # the registry plays no part: losing it changes nothing
        r.delete(keys.ends(topic))
        assert reader._read().ends == {"parse": [3, 2, 2, 0, 0, 0, 0, 0]}


def _partition_log(bootstrap: str, topic: str, partitions: int) -> dict[int, list[bytes]]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    idle = 0
    while idle < 5:
        msgs = c.consume(100, timeout=0.5)
        idle = 0 if msgs else idle + 1
        for m in msgs:
            out[m.partition()].append(m.value())
    c.close()
    return out


def test_staged_records_go_in_order_before_what_is_produced_after_them(kafka_bootstrap, redis_url):
    """Four records staged to partitions 0, 1, 0, 1, then one produced at once to 0, then
    two staged and flushed; three staged by key to another topic: each partition's log
    in the order given, and the ends registry counting every record."""
    keys = Keys("stage" + uuid.uuid4().hex[:6])
    topic, by_key = keys.topic("x"), keys.topic("y")
    ensure_topics(kafka_bootstrap, [topic, by_key], partitions=2)
    r = redis.Redis.from_url(redis_url)
    tracked = TrackedProducer(kafka_bootstrap, r, keys)
    for k, part in enumerate([0, 1, 0, 1]):
        tracked.stage(topic, f"s{k}".encode(), part)
    for k in range(3):
        tracked.stage(by_key, f"k{k}".encode(), None, b"same-key")
    tracked.produce(topic, b"now", 0)
    tracked.stage(topic, b"after0", 0)
    tracked.stage(topic, b"after1", 1)
    tracked.flush()
    assert _partition_log(kafka_bootstrap, topic, 2) == {
        0: [b"s0", b"s2", b"now", b"after0"],
        1: [b"s1", b"s3", b"after1"],
    }
    keyed = _partition_log(kafka_bootstrap, by_key, 2)
    assert sorted(keyed.values()) == [[], [b"k0", b"k1", b"k2"]]  # one key: one partition
    for t, expected in (
        (topic, {0: 4, 1: 3}),
        (by_key, {p: len(v) for p, v in keyed.items() if v}),
    ):
        assert {int(p): int(e) for p, e in r.hgetall(keys.ends(t)).items()} == expected


def test_each_thread_sends_what_it_staged(kafka_bootstrap, redis_url):
    """A thread's flush sends its own staged records, not another's: two staged by a
    thread that sent them are delivered, one by a thread that did not is not."""
    import threading

    keys = Keys("stage" + uuid.uuid4().hex[:6])
    topic = keys.topic("x")
    ensure_topics(kafka_bootstrap, [topic], partitions=1)
    tracked = TrackedProducer(kafka_bootstrap, redis.Redis.from_url(redis_url), keys)

    def stage(values: list[bytes], send: bool) -> None:
        for v in values:
            tracked.stage(topic, v, 0)
        if send:
            tracked.send()

    for values, send in (([b"a", b"b"], True), ([b"c"], False)):
        t = threading.Thread(target=stage, args=(values, send))
        t.start()
        t.join()
    tracked.flush()
    assert _partition_log(kafka_bootstrap, topic, 1) == {0: [b"a", b"b"]}
