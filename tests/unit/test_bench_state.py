"""The keyed-move benchmark's summary: a run's ratios and the medians over runs."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.bench_state import medians, ratios

pytestmark = pytest.mark.unit


def _variant(p99: float | None, cpu: float, pause: float | None = None, lost: int = 0) -> dict:
    return {
        "latency_after_resize_unmoved": {"p50": 10.0, "p99": p99, "n": 800},
        "pause_moved": {"median_ms": pause, "p99_ms": None if pause is None else 2 * pause, "n": 6},
        "cpu_ms_per_event": cpu,
        "lost": lost,
    }


def _run(keyed: float | None, still: float | None, pause: float = 10.0, lost: int = 0) -> dict:
    return {
        "keyed": _variant(keyed, 0.06, pause, lost),
        "keyed-still": _variant(still, 0.05),
        "unkeyed": _variant(None, 0.04),
    }


def test_a_runs_ratios_are_the_keyed_figures_over_the_still_and_unkeyed_ones():
    out = ratios(_run(30.0, 24.0))
    assert out["unmoved_p99_ratio"] == 1.25
    assert out["cpu_ratio_keyed_to_unkeyed"] == 1.5
    assert out["keyed"]["latency_after_resize_unmoved"]["p99"] == 30.0


def test_a_run_without_a_still_figure_has_no_ratio():
    assert ratios(_run(30.0, None))["unmoved_p99_ratio"] is None


def test_the_ratio_over_runs_is_between_the_medians_not_the_median_of_ratios():
    runs: list[dict[str, Any]] = [_run(30.0, 20.0), _run(22.0, 25.0), _run(26.0, 19.0, lost=2)]
    out = medians(runs)
    # medians: keyed 26, still 20 -> 1.3; the runs' own ratios 1.5, 0.88, 1.37 -> 1.37
    assert out["unmoved_p99_keyed"] == 26.0
    assert out["unmoved_p99_still"] == 20.0
    assert out["unmoved_p99_ratio"] == 1.3
    assert out["lost"] == 2


def test_the_moved_pauses_are_the_medians_of_each_runs_figures_skipping_missing_ones():
    runs = [_run(30.0, 20.0, pause=8.0), _run(30.0, 20.0, pause=16.0), _run(30.0, 20.0, pause=10.0)]
    runs[1]["keyed"]["pause_moved"] = {"median_ms": None, "p99_ms": None, "n": 0}
    out = medians(runs)
    assert out["pause_moved_median_ms"] == 9.0  # of 8 and 10
    assert out["pause_moved_p99_ms"] == 18.0  # of 16 and 20
