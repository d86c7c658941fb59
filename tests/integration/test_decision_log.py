"""The run folder's ``decisions.jsonl`` on a real broker: a run copies the decisions made
while it runs, not those already on the topic (an earlier run's, on the same broker)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from elastic_sps.io.kafka_admin import ensure_topics
from elastic_sps.services.ensemble.decisions import DecisionLog

pytestmark = pytest.mark.integration


def test_a_run_copies_its_own_decisions_only(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = f"decisions.{uuid.uuid4().hex[:6]}"
    ensure_topics(kafka_bootstrap, [topic])
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    out = tmp_path / "decisions.jsonl"
    out.write_text('{"interval": 1}\n')  # the earlier run's copy
    for k in (1, 2):  # the earlier run's decisions
        producer.produce(topic, f'{{"interval": {k}}}'.encode(), partition=0)
    producer.flush(10)
    log = DecisionLog(kafka_bootstrap, topic, out)
    producer.produce(topic, b'{"interval": 3}', partition=0)
    producer.flush(10)
    deadline = time.monotonic() + 30
    while "3" not in out.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    log.close()
    assert out.read_text().splitlines() == ['{"interval": 1}', '{"interval": 3}']
