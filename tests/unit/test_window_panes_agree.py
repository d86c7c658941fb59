"""The pane layout of a hopping window (an accumulator per key and slide, merged at the
close) against the per-window layout (an accumulator per key and window) on seeded
random streams: the same rows, the same fates (late or not) per event, and no pane left
once every window fired. The per-window layout is the reference; the hand-counted cases
are in ``test_window_panes.py``. Slides include decimals (0.1, 0.3), windows sizes
rounded and not, lateness floats, events and watermarks on pane bounds, times near zero
and at epoch seconds."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from elastic_sps.model import topology
from elastic_sps.pipeline.local_store import MemoryStore
from elastic_sps.pipeline.stateful import Late, WindowAggregator

pytestmark = pytest.mark.unit

CASES = 400
Step = tuple[str, str, float, int]  # ("e", key, time, value) or ("w", "", watermark, 0)
Row = tuple[str, float, int, int]  # window id, end, count, sum


class SumNoMerge:
    """Without ``merge``: the per-window layout."""

    def initial(self) -> dict[str, int]:
        return {"n": 0, "s": 0}

    def add(self, acc: dict[str, int], payload: Any) -> dict[str, int]:
        return {"n": acc["n"] + 1, "s": acc["s"] + payload["v"]}


class SumMerge(SumNoMerge):
    """With ``merge``: the pane layout."""

    def merge(self, a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
        return {"n": a["n"] + b["n"], "s": a["s"] + b["s"]}


def _window_op(window: dict[str, float], groups: int) -> Any:
    doc = {"name": "w", "et_ms": 1, "key": "field:k", "key_groups": groups, "max_replicas": 1,
           "window": window}  # fmt: skip
    return topology.from_dict({"operators": [doc], "edges": [{"from": "source", "to": "w"}]})["w"]


def _run(agg: Any, op: Any, steps: list[Step]) -> tuple[list[Row], list[bool], int, int]:
    """The rows fired (in firing order), each event's fate (late or not), the windows or
    panes left open after a final watermark, and the slides per window in use."""
    w, store = WindowAggregator(op, agg), MemoryStore()
    rows: list[Row] = []
    late: list[bool] = []

    def fire(wm: float) -> None:
        store.watermark = wm
        for r in w.fire(store, wm):
            rows.append((r.id, r.end, r.payload["value"]["n"], r.payload["value"]["s"]))

    for kind, key, t, v in steps:
        if kind == "w":
            if store.watermark is None or t > store.watermark:
                fire(t)
            continue
        try:
            w.add(store, {"k": key, "v": v}, t)
            late.append(False)
        except Late:
            late.append(True)
    fire(1e12)
    return rows, late, store.open_windows(), w.panes


def _steps(rng: random.Random, slide: float, k: int) -> list[Step]:
    """Events around a rising watermark, some on pane bounds, some behind it."""
    steps: list[Step] = []
    # near zero, or at epoch seconds (a decimal slide's float products carry noise there)
    wm = rng.choice([0.0, 0.0, 1784742435.0]) + rng.uniform(-rng.choice([10, 1000, 1.7e6]), 0)
    for _ in range(rng.randint(1, 60)):
        if rng.random() < 0.3:
            wm += rng.choice([0, slide, rng.uniform(0, 3 * slide), k * slide])
            if rng.random() < 0.3:
                wm = round(wm / slide) * slide
            steps.append(("w", "", wm, 0))
            continue
        t = wm + rng.uniform(-1.5 * k * slide, 1.5 * k * slide)
        if rng.random() < 0.4:  # on a pane bound
            reach = 2 * k * slide
            lo, hi = math.floor((wm - reach) / slide), math.floor((wm + reach) / slide)
            t = rng.randint(lo, hi) * slide
        steps.append(("e", rng.choice("abcde"), t, rng.randint(1, 9)))
    return steps


def _case(seed: int) -> tuple[dict[str, float], int, list[Step]]:
    rng = random.Random(seed)
    slide = rng.choice([2, 1, 0.1, 0.3, 0.25, 0.2, 5])
    k = rng.choice([2, 3, 5])
    size = round(slide * k, 9) if rng.random() < 0.5 else slide * k
    lateness = rng.choice([0, 0, slide, 0.1, 0.3, 1.5, 0.7])
    window = {"hopping_s": size, "slide_s": slide, "lateness_s": lateness}
    return window, rng.choice([1, 2, 7]), _steps(rng, slide, k)


def test_panes_give_the_per_window_rows_and_fates_on_random_streams() -> None:
    compared = 0
    for seed in range(CASES):
        window, groups, steps = _case(seed)
        op = _window_op(window, groups)
        reference = _run(SumNoMerge(), op, steps)
        panes = _run(SumMerge(), op, steps)
        assert reference[3] == 0  # no merge: per window
        if panes[3] == 0:  # float noise kept the size from whole slides: both per window
            continue
        compared += 1
        assert panes[0] == reference[0], (seed, window)
        assert panes[1] == reference[1], (seed, window)
        assert panes[2] == 0, (seed, window)
    assert compared >= CASES // 2  # most cases do compare two layouts
