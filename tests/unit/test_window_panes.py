"""A hopping window whose size is a whole number of slides keeps one accumulator per key
and slide (a pane), merged when a window closes: the results are the per-window ones."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_sps.model import topology
from elastic_sps.pipeline.local_store import MemoryStore
from elastic_sps.pipeline.stateful import Count, Late, WindowAggregator, slides_per_window

pytestmark = pytest.mark.unit


def _op(window: dict[str, float]) -> Any:
    doc = {"name": "w", "et_ms": 1, "key": "field:k", "window": window}
    topo = topology.from_dict({"operators": [doc], "edges": [{"from": "source", "to": "w"}]})
    return topo["w"]


class InPlaceCount:
    """Merges into its first argument, as a user's aggregate may."""

    def initial(self) -> dict[str, int]:
        return {"n": 0}

    def add(self, acc: dict[str, int], payload: Any) -> dict[str, int]:
        acc["n"] += 1
        return acc

    def merge(self, a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
        a["n"] += b["n"]
        return a

    def result(self, acc: dict[str, int]) -> int:
        return acc["n"]


class NoMerge:
    def initial(self) -> int:
        return 0

    def add(self, acc: int, payload: Any) -> int:
        return acc + 1


def _counts(agg: Any, times: list[float], watermark_before: dict[float, float]) -> dict:
    """Each window's value after events at ``times`` (key "a"), the watermark set to
    ``watermark_before[t]`` (firing what it closes) before the event at ``t``."""
    w = WindowAggregator(_op({"hopping_s": 10, "slide_s": 2}), agg)
    store, out = MemoryStore(), {}
    for t in times:
        if t in watermark_before:
            store.watermark = watermark_before[t]
            out |= {(r.payload["start"], r.payload["end"]): r.payload["value"]
                    for r in w.fire(store, store.watermark)}  # fmt: skip
        w.add(store, {"k": "a"}, t)
    store.watermark = 1000.0
    out |= {
        (r.payload["start"], r.payload["end"]): r.payload["value"] for r in w.fire(store, 1000.0)
    }
    assert store.open_windows() == 0  # every pane gone with its last window
    return out


def test_each_window_counts_the_events_of_its_panes():
    # t = 1, 3, 5, 11 in windows of 10 s sliding by 2 s, counted by hand
    starts = [-8.0, -6.0, -4.0, -2.0, 0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    want = {(s, s + 10): n for s, n in zip(starts, [1, 2, 3, 3, 3, 3, 2, 1, 1, 1], strict=True)}
    assert _counts(Count(), [1, 3, 5, 11], {}) == want
    assert _counts(InPlaceCount(), [1, 3, 5, 11], {}) == want  # a pane is not merged into


def test_an_event_counts_only_in_its_windows_still_open():
    # at t = 5 the watermark is 8: [-8, 2) .. [-2, 8) have closed (and fired) without it
    got = _counts(Count(), [1, 3, 5, 11], {5: 8.0})
    assert got[(-4.0, 6.0)] == 2 and got[(-2.0, 8.0)] == 2
    assert got[(0.0, 10.0)] == 3 and got[(2.0, 12.0)] == 3 and got[(4.0, 14.0)] == 2


def test_panes_only_where_a_window_is_whole_slides_and_the_aggregate_merges():
    assert slides_per_window(_op({"hopping_s": 10, "slide_s": 2}), Count()) == 5
    assert slides_per_window(_op({"hopping_s": 0.3, "slide_s": 0.1}), Count()) == 3
    assert slides_per_window(_op({"hopping_s": 5, "slide_s": 2}), Count()) == 0
    assert slides_per_window(_op({"hopping_s": 10, "slide_s": 2}), NoMerge()) == 0
    assert slides_per_window(_op({"tumbling_s": 10}), Count()) == 0
    # without panes the same answers, one accumulator per window
    w = WindowAggregator(_op({"hopping_s": 10, "slide_s": 2}), NoMerge())
    store = MemoryStore()
    for t in (1, 3):
        w.add(store, {"k": "a"}, t)
    assert store.open_windows() == 6  # [-8, 2) .. [2, 12)
    store.watermark = 1000.0
    assert sorted(r.payload["value"] for r in w.fire(store, 1000.0)) == [1, 1, 2, 2, 2, 2]


def test_an_event_into_a_pane_held_counts_in_its_open_windows_and_late_when_none_is():
    # pane [4, 6) opened by t = 4.5; at t = 5 the watermark is 8: [-4, 6) and [-2, 8) closed
    got = _counts(Count(), [4.5, 5], {5: 8.0})
    assert got == {(-4.0, 6.0): 1, (-2.0, 8.0): 1, (0.0, 10.0): 2, (2.0, 12.0): 2, (4.0, 14.0): 2}
    w = WindowAggregator(_op({"hopping_s": 10, "slide_s": 2}), Count())
    store = MemoryStore()
    w.add(store, {"k": "a"}, 4.5)
    store.watermark = 14.0  # its newest window, [4, 14), closed (not yet fired)
    with pytest.raises(Late):
        w.add(store, {"k": "a"}, 5)


class KeepsLarger(InPlaceCount):
    """Returns one of its arguments from ``merge`` and changes its first in place: a
    stored pane must never be either."""

    def merge(self, a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
        return b if b["n"] > a["n"] else super().merge(a, b)


def test_a_merge_returning_or_changing_its_arguments_leaves_the_panes_alone():
    w = WindowAggregator(_op({"hopping_s": 6, "slide_s": 2}), KeepsLarger())
    store = MemoryStore()
    for t in (1, 3, 3.5):  # panes [0, 2): 1 event, [2, 4): 2 events
        w.add(store, {"k": "a"}, t)
    store.watermark = 1000.0
    got = {r.payload["start"]: r.payload["value"] for r in w.fire(store, 1000.0)}
    # [-4, 2): pane 0 alone; [-2, 4): merge(1, 2) returns the 2; [0, 6): 2 + 1 kept
    assert got == {-4.0: 1, -2.0: 2, 0.0: 2, 2.0: 2}


def test_windows_of_a_decimal_slide_take_an_event_on_a_bound_once():
    # 0.3 / 0.1 is 2.9999999999999996 in floats: t = 0.3 is in [0.1, 0.4) .. [0.3, 0.6)
    hop = {"hopping_s": 0.3, "slide_s": 0.1}
    spec = _op(hop).window
    assert spec.assign(0.3) == [(0.1, 0.4), (0.2, 0.5), (0.3, 0.6)]
    assert spec.slide_index(0.3) == 3
    for agg in (Count(), NoMerge()):
        w, store = WindowAggregator(_op(hop), agg), MemoryStore()
        for t in (0.05, 0.3):
            w.add(store, {"k": "a"}, t)
        store.watermark = 10.0
        got = {r.payload["start"]: r.payload["value"] for r in w.fire(store, 10.0)}
        assert got[0] == 1 and got[0.1] == 1 and got[0.3] == 1


def test_an_event_is_late_for_a_window_exactly_when_a_firing_would_take_it():
    # lateness 0.3 in floats: at watermark 1.2, [0.3, 0.9) is not fired (0.9 is above
    # 1.2 - 0.3 = 0.8999999999999999), so it still takes an event, in both layouts
    hop = {"hopping_s": 0.6, "slide_s": 0.3, "lateness_s": 0.3}
    assert not _op(hop).window.closed(0.9, 1.2)
    for agg in (Count(), NoMerge()):
        w, store = WindowAggregator(_op(hop), agg), MemoryStore()
        w.add(store, {"k": "a"}, 0.7)
        store.watermark = 1.2
        assert w.fire(store, 1.2) == []
        w.add(store, {"k": "a"}, 0.65)
        store.watermark = 10.0
        got = {r.payload["start"]: r.payload["value"] for r in w.fire(store, 10.0)}
        assert got == {0.3: 2, 0.6: 2}


class CountBeforePanes:
    """The same count as ``InPlaceCount`` as a deployment without ``merge`` kept it."""

    def initial(self) -> dict[str, int]:
        return {"n": 0}

    def add(self, acc: dict[str, int], payload: Any) -> dict[str, int]:
        return {"n": acc["n"] + 1}

    def result(self, acc: dict[str, int]) -> int:
        return acc["n"]


def test_windows_opened_before_panes_keep_their_events_after_an_upgrade():
    # t = 1, 3 under one accumulator per window, then t = 5, 11 under panes on the same
    # state: every window counts all four, as test_each_window_counts_the_events_of_its_panes
    hop = {"hopping_s": 10, "slide_s": 2}
    store = MemoryStore()
    before = WindowAggregator(_op(hop), CountBeforePanes())
    for t in (1, 3):
        before.add(store, {"k": "a"}, t)
    after = WindowAggregator(_op(hop), InPlaceCount())
    assert (before.panes, after.panes) == (0, 5)
    for t in (5, 11):
        after.add(store, {"k": "a"}, t)
    store.watermark = 1000.0
    got = {r.payload["start"]: r.payload["value"] for r in after.fire(store, 1000.0)}
    starts = [-8.0, -6.0, -4.0, -2.0, 0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    assert got == dict(zip(starts, [1, 2, 3, 3, 3, 3, 2, 1, 1, 1], strict=True))
    assert store.open_windows() == 0


def test_an_event_on_a_decimal_bound_at_epoch_seconds_starts_its_own_slide():
    # 1784742435.8 / 0.1 is 17847424357.999998 in floats, and 17847424358 * 0.1 is
    # 1784742435.8000002: the event starts slide 17847424358, in [.6, .9) .. [.8, 1.1)
    hop = {"hopping_s": 0.3, "slide_s": 0.1}
    spec = _op(hop).window
    t = 1784742435.8
    assert spec.slide_index(t) == 17847424358
    want = [(1784742435.6, 1784742435.9), (1784742435.7, 1784742436), (t, 1784742436.1)]
    assert spec.assign(t) == want
    for agg in (Count(), NoMerge()):
        w, store = WindowAggregator(_op(hop), agg), MemoryStore()
        for at in (1784742435.75, t):
            w.add(store, {"k": "a"}, at)
        store.watermark = t + 10
        got = {r.payload["start"]: r.payload["value"] for r in w.fire(store, t + 10)}
        # .75 is in [.5, .8) .. [.7, 1.0); .8 is not in [.5, .8)
        assert got == {1784742435.5: 1, 1784742435.6: 2, 1784742435.7: 2, t: 1}
