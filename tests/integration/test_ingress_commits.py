"""The ingress's input offsets against a real broker and redis-server: committed only for
delivered records, at most every ``commit_interval_s`` while records flow, and all of
them at the first quiet read (so a crash re-reads at most one interval of input)."""

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
from elastic_sps.las.moves import ingress_group
from elastic_sps.services.ingress.loop import Ingress
from elastic_sps.settings import IngressSettings

pytestmark = pytest.mark.integration

EVENTS = 40


def _committed(bootstrap: str, topic: str, group: str) -> int | None:
    """The ingress group's committed offset of the topic's one partition (None: none)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        (tp,) = c.committed([TopicPartition(topic, 0)], timeout=10)
        return tp.offset if tp.offset >= 0 else None
    finally:
        c.close()


def _wait_committed(bootstrap: str, topic: str, group: str) -> int:
    deadline = time.monotonic() + 20
    while (at := _committed(bootstrap, topic, group)) is None:
        assert time.monotonic() < deadline, "no commit"
        time.sleep(0.1)
    return at


def _ingress(tmp_path: Path, bootstrap: str, redis_url: str, topic: str) -> Ingress:
    prefix = f"commits{uuid.uuid4().hex[:6]}"
    topo = tmp_path / "one.yaml"
    topo.write_text(
        f"name: one\nsource: {{topics: [{topic}], format: json, key: k}}\n"
        "operators:\n  - {name: one, code: 'json:dumps', max_replicas: 2, et_ms: 1}\n"
        "edges:\n  - {from: source, to: one}\n"
    )
    ensure_topics(bootstrap, [topic], partitions=1)
    ensure_topics(bootstrap, [Keys(prefix).topic("one")], partitions=2)
    settings = IngressSettings(
        kafka_bootstrap_servers=bootstrap,
        redis_url=redis_url,
        key_prefix=prefix,
        topology=str(topo),
        commit_interval_s=3600,  # no second commit while this test's records flow
    )
    return Ingress(settings, CollectorRegistry())


def _send(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for k in range(n):
        p.produce(topic, json.dumps({"k": f"s{k % 3}", "v": k}).encode(), partition=0)
    p.flush(10)


def _poll_until_received(ingress: Ingress, n: int) -> None:
    deadline = time.monotonic() + 60
    while ingress.metrics.counts["received"] < n:
        assert time.monotonic() < deadline, f"received {ingress.metrics.counts}"
        ingress.poll()


def test_offsets_commit_once_per_interval_while_records_flow_and_all_when_quiet(
    tmp_path, kafka_bootstrap, redis_url
):
    topic = f"in.{uuid.uuid4().hex[:6]}"
    ingress = _ingress(tmp_path, kafka_bootstrap, redis_url, topic)
    try:
        _send(kafka_bootstrap, topic, EVENTS)
        _poll_until_received(ingress, EVENTS)  # the first read commits (none before it)
        group = ingress_group(ingress.keys.prefix)  # the deployment's own
        first = _wait_committed(kafka_bootstrap, topic, group)  # asynchronous: landed by now
        assert 0 < first <= EVENTS
        _send(kafka_bootstrap, topic, EVENTS)
        _poll_until_received(ingress, 2 * EVENTS)
        # within the interval: the second batch is delivered but not yet committed
        assert _committed(kafka_bootstrap, topic, group) == first
        ingress.poll()  # a quiet read: everything delivered is committed now
        deadline = time.monotonic() + 20
        while _committed(kafka_bootstrap, topic, group) != 2 * EVENTS:
            assert time.monotonic() < deadline, _committed(kafka_bootstrap, topic, group)
            ingress.poll()
    finally:
        ingress.close()
    assert ingress.metrics.counts["admitted"] == 2 * EVENTS
