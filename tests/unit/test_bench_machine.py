"""The machine's speed probe behind the comparisons' rescaled figures
(``benchmarks.harness.machine``): which samples a phase takes, the rescaling, a row's
``probe_ms`` from its phase, and the probe process kept out of every CPU figure."""

from __future__ import annotations

import time

import pytest

from benchmarks.harness import runs
from benchmarks.harness.machine import SpeedProbe, at_fastest, median_between
from benchmarks.harness.processes import PROBE, cpu_seconds, role_of

pytestmark = pytest.mark.unit


def test_a_phase_takes_the_median_of_the_samples_inside_it_ends_included():
    samples = [(9.9, 50.0), (10.0, 20.0), (11.0, 30.0), (12.0, 22.0), (12.1, 90.0)]
    assert median_between(samples, 10.0, 12.0) == 22.0  # 20, 30, 22
    assert median_between(samples, 10.5, 12.0) == 26.0  # 30, 22
    assert median_between(samples, 13.0, 14.0) is None


def test_figures_are_rescaled_to_the_fastest_phase_of_the_invocation():
    rows = [
        {"peer": "a", "events_per_core_s": 10_000, "probe_ms": 30.0},
        {"peer": "b", "events_per_core_s": 12_000, "probe_ms": 20.0},
        {"peer": "c", "events_per_core_s": 9_000, "probe_ms": None},
        {"peer": "d", "error": "no rows"},
    ]
    at_fastest(rows, "events_per_core_s", "fast")
    # a ran at 30 ms a unit against the fastest 20: 1.5 times the CPU for the same work
    assert [r.get("fast") for r in rows] == [15_000, 12_000, None, None]
    cpu = [
        {"cpu_ms_per_event": 0.12, "probe_ms": 30.0},
        {"cpu_ms_per_event": 0.1, "probe_ms": 24.0},
    ]
    at_fastest(cpu, "cpu_ms_per_event", "fast", per_cpu=False)
    assert [r["fast"] for r in cpu] == [0.096, 0.1]  # 0.12 / (30 / 24)


def test_no_probe_readings_no_rescaled_figure():
    rows = [{"events_per_core_s": 5}]
    at_fastest(rows, "events_per_core_s", "fast")
    assert rows == [{"events_per_core_s": 5}]


class _Probe:
    def median_between(self, t0: float, t1: float) -> float:
        return t1 - t0


def test_a_rows_phase_becomes_the_probes_reading_over_it():
    def measure(peer: str, case: dict) -> dict:
        return {"peer": peer, "phase": (100.0, 103.5)}

    rows = runs.run_all(measure, ["a"], [{}], 1, True, None, probe=_Probe())  # type: ignore[arg-type]
    assert rows == [{"peer": "a", "run": 0, "probe_ms": 3.5}]
    rows = runs.run_all(measure, ["a"], [{}], 1, True, None)
    assert rows == [{"peer": "a", "run": 0}]  # no probe: the phase is dropped


def test_the_probe_samples_its_unit_and_no_cpu_figure_counts_it():
    with SpeedProbe(every_s=0.05) as probe:
        deadline = time.monotonic() + 30
        while len(probe.samples) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        roles = cpu_seconds()
        t, ms = probe.samples[0]
        assert ms > 0 and abs(t - time.time()) < 60
    assert len(probe.samples) >= 3
    for proc in probe._procs:  # one per core
        assert role_of(" ".join(map(str, proc.args))) == PROBE  # type: ignore[arg-type]
    assert PROBE not in roles
