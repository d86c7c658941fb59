"""The peers' sink reader (``bench_peers.Collector``) on a real broker: each id's first
arrival, whichever engine's output shape carries it."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Producer

from benchmarks.bench_peers import Collector
from elastic_sps.io.kafka_admin import ensure_topics

pytestmark = pytest.mark.integration


class _Running:
    def alive(self) -> bool:
        return True


def test_the_collector_notes_each_id_once(kafka_bootstrap):
    topic = f"collector-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_bootstrap, [topic])
    p = Producer({"bootstrap.servers": kafka_bootstrap})
    # elastic-sps's sink writes {"id", "value"}; the peers carry "_meta"; "1" comes twice
    for value in ({"id": "1", "value": {}}, {"_meta": {"id": 2}, "x": 0}, {"id": "1", "value": {}}):
        p.produce(topic, json.dumps(value).encode())
    p.flush(10)
    c = Collector(kafka_bootstrap, topic)
    c.start()
    try:
        last = c.wait_for(["1", "2"], _Running(), timeout=60)  # type: ignore[arg-type]
    finally:
        c.halt.set()
        c.join(10)
    assert set(c.seen) == {"1", "2"} and last == max(c.seen.values())
