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
