"""The benchmarks' one sink reader (``benchmarks.harness.collector.Collector``) on a real
broker: each id's first arrival, whichever engine's output shape carries it, every row
for the windows it waits for (a window's rows read apart too), and what it says when
outputs are missing."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from confluent_kafka import Producer

from benchmarks.harness.collector import ROWS_SETTLE_S, Collector
from elastic_sps.io.kafka_admin import ensure_topics

pytestmark = pytest.mark.integration


class _Running:
    def __init__(self, alive: bool = True) -> None:
        self._alive = alive

    def alive(self) -> bool:
        return self._alive


def _topic_with(bootstrap: str, values: list[dict]) -> str:
    topic = f"collector-{uuid.uuid4().hex[:8]}"
    ensure_topics(bootstrap, [topic])
    p = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        p.produce(topic, json.dumps(value).encode())
    p.flush(10)
    return topic


def test_the_collector_notes_each_id_once(kafka_bootstrap):
    # elastic-sps's sink writes {"id", "value"}; the peers carry "_meta"; "1" comes twice
    values = [{"id": "1", "value": {"n": 1}}, {"_meta": {"id": 2}, "x": 0},
              {"id": "1", "value": {"n": 2}}]  # fmt: skip
    with Collector(kafka_bootstrap, _topic_with(kafka_bootstrap, values)) as c:
        last = c.wait_for(["1", "2"], _Running(), timeout=60)
        c.wait_for_count(2, timeout=60)
    assert set(c.seen) == {"1", "2"} and last == max(c.seen.values())
    assert c.first["1"] == {"n": 1}  # the first arrival's row, not the repeat's
    assert len(c.rows) == 3


def test_the_collector_waits_for_windows_and_says_what_is_missing(kafka_bootstrap):
    rows = [{"auction": a, "window_start": w, "window_end": w + 10} for a, w in
            ((1, 0), (2, 0), (1, 10))]  # fmt: skip
    with Collector(kafka_bootstrap, _topic_with(kafka_bootstrap, rows)) as c:
        last = c.wait_for_windows([0, 10], _Running(), timeout=60)
        assert last == max(t for t, _ in c.rows)
        with pytest.raises(RuntimeError, match="1 of 3 windows missing"):
            c.wait_for_windows([0, 10, 20], _Running(alive=False), timeout=60)
        with pytest.raises(RuntimeError, match="1 of 1 outputs missing"):
            c.wait_for(["nope"], _Running(), timeout=0.2)
    assert sorted(r["auction"] for _, r in c.rows) == [1, 1, 2]


def test_the_collector_waits_for_a_windows_late_rows_but_not_forever(kafka_bootstrap):
    """Window 0 has two rows, the second produced 0.5 s after the wait began (another
    partition of the sink's topic, read later): the wait returns with both. Asked for a
    third that never comes, it returns once ``ROWS_SETTLE_S`` has passed, no error."""
    first = {"auction": 1, "window_start": 0, "window_end": 10}
    topic = _topic_with(kafka_bootstrap, [first])
    late = threading.Timer(0.5, lambda: _produce(kafka_bootstrap, topic, {**first, "auction": 2}))
    with Collector(kafka_bootstrap, topic) as c:
        late.start()
        c.wait_for_windows({0: 2}, _Running(), timeout=60)
        assert sorted(r["auction"] for _, r in c.rows) == [1, 2]
        began = time.monotonic()
        c.wait_for_windows({0: 3}, _Running(), timeout=60)
        assert time.monotonic() - began >= ROWS_SETTLE_S
    late.join()


def _produce(bootstrap: str, topic: str, value: dict) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    p.produce(topic, json.dumps(value).encode())
    p.flush(10)
