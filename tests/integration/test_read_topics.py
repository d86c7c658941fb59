"""Reading several topics at once, as a run's report does: each topic's JSON records
written before the read, by topic, whatever the partition; others skipped."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Producer

from elastic_sps.io.kafka_admin import ensure_topics
from elastic_sps.io.kafka_io import read_topic, read_topics

pytestmark = pytest.mark.integration


def test_each_topics_records_come_back_under_its_name(kafka_bootstrap):
    a, b, empty = (f"read.{name}.{uuid.uuid4().hex[:6]}" for name in ("a", "b", "empty"))
    ensure_topics(kafka_bootstrap, [a, b, empty], partitions=2)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for k in range(5):
        producer.produce(a, json.dumps({"k": k}).encode(), partition=k % 2)
    producer.produce(b, b"not json", partition=0)
    producer.produce(b, json.dumps({"b": 1}).encode(), partition=1)
    producer.flush(10)
    got = read_topics(kafka_bootstrap, [a, b, empty], quiet_s=1.0)
    assert sorted(r["k"] for r in got[a]) == [0, 1, 2, 3, 4]
    assert got[b] == [{"b": 1}] and got[empty] == []
    assert read_topic(kafka_bootstrap, b, quiet_s=1.0) == [{"b": 1}]
