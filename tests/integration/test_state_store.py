"""Keyed state over a real redis-server: state and the offset it reflects commit together,
a crash between two commits replays without a second effect, a retried task's commit is
fenced, windows fire once, and a late event is told apart."""

from __future__ import annotations

import pytest

from shared.io.knowledge_base import Keys
from shared.io.state_store import PartitionStore
from shared.model import topology
from shared.model.keyed import key_group
from shared.pipeline.stateful import Count, KeyState, Late, WindowAggregator

pytestmark = pytest.mark.integration


def _aggregator(name: str, window: dict) -> WindowAggregator:
    """A window operator keyed by ``k`` counting its events (no code)."""
    op = {"name": name, "et_ms": 1, "key": "field:k", "window": window}
    topo = topology.from_dict({"operators": [op], "edges": [{"from": "source", "to": name}]})
    return WindowAggregator(topo[name], Count(), idle_s=60.0)


def _add(store: PartitionStore, key: str, amount: int) -> int:
    state = KeyState(store, key_group(key, 128), key)
    state["total"] = state.get("total", 0) + amount
    return int(state["total"])


def test_state_and_offset_commit_together_and_a_crash_replays_once(redis_client):
    keys = Keys("state1")
    first = PartitionStore(redis_client, keys, "total", 0)
    assert first.committed is None
    assert [_add(first, "alice", a) for a in (5, 7)] == [5, 12]  # offsets 0, 1
    assert first.commit(2, owner=0)
    # the next task takes offsets 2-3 (+1, +2), then crashes before its commit
    crashed = PartitionStore(redis_client, keys, "total", 0)
    assert crashed.committed == 2
    assert [_add(crashed, "alice", a) for a in (1, 2)] == [13, 15]
    # nothing of it is visible: the retry starts from offset 2 with alice at 12
    retry = PartitionStore(redis_client, keys, "total", 0)
    assert retry.committed == 2
    assert [_add(retry, "alice", a) for a in (1, 2)] == [13, 15]
    assert retry.commit(4, owner=1)
    # the crashed attempt, had it lived on (a zombie), may not apply its effects again
    assert not crashed.commit(4, owner=0)
    after = PartitionStore(redis_client, keys, "total", 0)
    assert after.committed == 4
    assert KeyState(after, key_group("alice", 128), "alice")["total"] == 15


def test_a_tumbling_count_fires_each_window_once_and_refuses_a_late_event(redis_client):
    """Input a delivers event times 1, 4, 12 (windows [0, 10) and [10, 20)); the
    watermark is a's latest time, 12: [0, 10) closes with 2 events, [10, 20) stays open;
    then an event at 8 is late; at 25 the second window closes with 1."""
    agg = _aggregator("count", {"tumbling_s": 10})
    store = PartitionStore(redis_client, Keys("win1"), "count", 0)
    for t in (1.0, 4.0, 12.0):
        agg.add(store, {"k": "x"}, t, "source/0", now=100.0)
    fired = agg.fire(store, now=100.0)
    assert [(r.id, r.payload) for r in fired] == [
        ("x@0", {"key": "x", "start": 0, "end": 10, "value": 2})
    ]
    assert store.commit(3, owner=0)
    again = PartitionStore(redis_client, Keys("win1"), "count", 0)
    assert agg.fire(again, now=100.0) == []  # fired and committed: never again
    with pytest.raises(Late):
        agg.add(again, {"k": "x"}, 8.0, "source/0", now=101.0)
    agg.add(again, {"k": "x"}, 25.0, "source/0", now=101.0)
    assert [r.payload["value"] for r in agg.fire(again, now=101.0)] == [1]
    assert [r.id for r in agg.fire(again, now=101.0)] == []


def test_sessions_merge_and_close_after_the_gap(redis_client):
    """Gap 5: events at 0 and 3 make one session [0, 8); an event at 20 opens another;
    the watermark 20 closes the first with 2 events."""
    agg = _aggregator("s", {"session_gap_s": 5})
    store = PartitionStore(redis_client, Keys("sess1"), "s", 0)
    for t in (0.0, 3.0, 20.0):
        agg.add(store, {"k": "u"}, t, "source/0", now=50.0)
    assert [r.payload for r in agg.fire(store, now=50.0)] == [
        {"key": "u", "start": 0.0, "end": 8.0, "value": 2}
    ]
