"""The ingress declares its source partition's watermark to every partition of the entry
operator, on a real broker and redis-server: the latest event time read, in order after
the events it covers, and idle only once it has sat at the partition's end for idle_s."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client import CollectorRegistry

from elastic_sps.io.kafka_admin import ensure_topics
from elastic_sps.io.knowledge_base import Keys
from elastic_sps.io.watermarks import Declaration, decode_declaration, is_declaration
from elastic_sps.services.ingress.loop import Ingress
from elastic_sps.settings import IngressSettings

pytestmark = pytest.mark.integration


def _ingress(tmp_path: Path, bootstrap: str, redis_url: str, topic: str) -> tuple[Ingress, str]:
    prefix = f"decl{uuid.uuid4().hex[:6]}"
    topo = tmp_path / "one.yaml"
    topo.write_text(
        f"name: one\nsource: {{topics: [{topic}], format: json, time: 'field:t'}}\n"
        "operators:\n  - {name: one, code: 'json:dumps', max_replicas: 2, et_ms: 1}\n"
        "edges:\n  - {from: source, to: one}\n"
    )
    entry = Keys(prefix).topic("one")
    ensure_topics(bootstrap, [topic], partitions=1)
    ensure_topics(bootstrap, [entry], partitions=2)
    settings = IngressSettings(
        kafka_bootstrap_servers=bootstrap,
        redis_url=redis_url,
        key_prefix=prefix,
        topology=str(topo),
        idle_s=1.0,
    )
    return Ingress(settings, CollectorRegistry()), entry


def _records(bootstrap: str, topic: str, partition: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex})
    c.assign([TopicPartition(topic, partition, 0)])
    out, deadline = [], time.monotonic() + 10
    _, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    while len(out) < high and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            out.append(m.value())
    c.close()
    return out


def test_the_source_declares_its_latest_time_then_idle_at_the_end(
    tmp_path, kafka_bootstrap, redis_url
):
    topic = f"wm.{uuid.uuid4().hex[:6]}"
    ingress, entry = _ingress(tmp_path, kafka_bootstrap, redis_url, topic)
    try:
        p = Producer({"bootstrap.servers": kafka_bootstrap})
        for t in (10, 20, 15):
            p.produce(topic, json.dumps({"t": t}).encode(), partition=0)
        p.flush(10)
        deadline = time.monotonic() + 60
        while ingress.metrics.counts["received"] < 3:
            assert time.monotonic() < deadline
            ingress.poll()
        quiet_until = time.monotonic() + 3.0  # past idle_s at the end
        while time.monotonic() < quiet_until:
            ingress.poll()
    finally:
        ingress.close()
    events_seen = 0
    for partition in (0, 1):
        records = _records(kafka_bootstrap, entry, partition)
        decls = [decode_declaration(r) for r in records if is_declaration(r)]
        events_seen += sum(1 for r in records if not is_declaration(r))
        assert decls[-1] == Declaration("source", 0, 1, 20.0, idle=True)
        marks = [d.wm for d in decls if d.wm is not None]
        assert marks == sorted(marks) and marks[-1] == 20.0
        # the events precede the declaration of their time
        first_20 = next(
            i
            for i, r in enumerate(records)
            if is_declaration(r) and decode_declaration(r).wm == 20.0
        )
        assert all(is_declaration(r) for r in records[first_20:])
    assert events_seen == 3
