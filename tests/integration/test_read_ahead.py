"""A task's live reader (``reading.feed_window``) on a real broker holds back what a replica
has not taken: a feed holds about its limit of records read ahead (a partition handed to
another replica moves behind them), and pausing loses and repeats nothing."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer

from elastic_sps.io.connections import kafka_config
from elastic_sps.io.kafka_admin import ensure_topics
from elastic_sps.services.dataplane.feed import WINDOW_END, Feed
from elastic_sps.services.dataplane.options import SourceOptions
from elastic_sps.services.dataplane.reading import READ_MAX, feed_window
from elastic_sps.settings import DataplaneSettings

pytestmark = pytest.mark.integration

RECORDS = 6000
LIMIT = 1500


def test_a_feed_holds_about_its_limit_and_pausing_loses_nothing(
    kafka_bootstrap: str, redis_url: str
) -> None:
    topic = f"ra{uuid.uuid4().hex[:6]}"
    ensure_topics(kafka_bootstrap, [topic], partitions=2)
    producer = Producer(kafka_config(kafka_bootstrap, **{"enable.idempotence": True}))  # in order
    for k in range(RECORDS):
        producer.produce(topic, str(k).encode(), partition=k % 2)
    producer.flush(10)
    settings = DataplaneSettings(kafka_bootstrap_servers=kafka_bootstrap, redis_url=redis_url)
    o = SourceOptions.model_construct(settings=settings)
    feed = Feed()  # one replica's, both partitions
    done = threading.Event()
    until = time.monotonic() + 120
    reader = threading.Thread(
        target=lambda: (feed_window(o, topic, {0: feed, 1: feed}, {0: 0, 1: 0},
                                    lambda: until, done.is_set, ahead=LIMIT)),
        daemon=True,
    )  # fmt: skip
    reader.start()
    got: list[Any] = []
    deadline = time.monotonic() + 60
    while feed.records() < LIMIT:  # the replica takes nothing yet: the reader runs ahead
        assert time.monotonic() < deadline, f"read ahead {feed.records()} of {LIMIT}"
        time.sleep(0.05)
    time.sleep(1.0)  # ... and then stops: one read on top, per partition paused late
    assert feed.records() <= LIMIT + 2 * READ_MAX
    while len(got) < RECORDS:
        assert time.monotonic() < deadline, f"{len(got)} of {RECORDS} read"
        batch = feed.get(timeout=10)
        feed.took(len(batch.records))  # as a replica's take says
        got.extend(batch.records)
    done.set()
    reader.join(10)
    by_partition = {j: [int(m.value()) for m in got if m.partition() == j] for j in (0, 1)}
    assert by_partition[0] == list(range(0, RECORDS, 2))  # all, once, in order
    assert by_partition[1] == list(range(1, RECORDS, 2))
    assert feed.get(timeout=5) is WINDOW_END
