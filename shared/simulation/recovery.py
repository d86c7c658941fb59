"""How long a run took to recover from a fault, from its per-interval series.

The band: before the fault, the ``PRE_FAULT`` intervals give the normal level of each
series; an interval is *in band* when its mean end-to-end latency is at most 1.5 × the
highest pre-fault latency + 250 ms and its backlog (events queued at all operators) at
most 1.5 × the highest pre-fault backlog + one pre-fault interval's mean input (a
micro-batch engine holds about an interval's arrivals in flight). An interval without
completions has no latency (a micro-batch engine at a low rate completes in bursts, so
that happens with nothing wrong) and is judged by its backlog alone.

``recovered_s``: seconds from the fault to the start of the first run of ``STEADY``
in-band intervals after the series left the band; 0 when it never left it; None when it
had not come back by the end of the run. The constants are round values chosen from what
they mean (a fault is what moves a series by half again its busiest normal interval),
not fitted to any run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

PRE_FAULT = 10  # intervals before the fault that set the normal level
STEADY = 3  # in-band intervals in a row that count as recovered
FACTOR = 1.5
LATENCY_SLACK_MS = 250.0


@dataclass(frozen=True)
class Interval:
    """One interval of a run: its index (start = index × td), input, latency, backlog."""

    index: int
    input_events: float
    latency_ms: float | None
    backlog: float


@dataclass(frozen=True)
class Band:
    latency_ms: float
    backlog: float

    def holds(self, iv: Interval) -> bool:
        latency_ok = iv.latency_ms is None or iv.latency_ms <= self.latency_ms
        return latency_ok and iv.backlog <= self.backlog


@dataclass(frozen=True)
class Recovery:
    band: Band | None
    left_band: bool
    recovered_s: float | None


def band(before: Sequence[Interval]) -> Band:
    """The band around the pre-fault intervals (module docstring)."""
    latencies = [iv.latency_ms for iv in before if iv.latency_ms is not None]
    mean_input = sum(iv.input_events for iv in before) / len(before) if before else 0.0
    return Band(
        latency_ms=FACTOR * max(latencies, default=0.0) + LATENCY_SLACK_MS,
        backlog=FACTOR * max((iv.backlog for iv in before), default=0.0) + mean_input,
    )


def recovery(series: Sequence[Interval], td: float, fault_at_s: float | None) -> Recovery:
    """When the run came back into the pre-fault band after ``fault_at_s`` (seconds on the
    same clock as ``index × td``); no fault or no series: nothing to measure."""
    if fault_at_s is None or not series:
        return Recovery(None, False, None)
    rows = sorted(series, key=lambda iv: iv.index)
    first_after = int(fault_at_s // td)  # the interval the fault happened in
    before = [iv for iv in rows if first_after - PRE_FAULT <= iv.index < first_after]
    limits = band(before)
    after = [iv for iv in rows if iv.index >= first_after]
    left, run_start, run = False, None, 0
    for iv in after:
        if not limits.holds(iv):
            left, run_start, run = True, None, 0
            continue
        if left:
            run_start = iv.index if run == 0 else run_start
            run += 1
            if run >= STEADY and run_start is not None:
                return Recovery(limits, True, max(0.0, run_start * td - fault_at_s))
    return Recovery(limits, left, None if left else 0.0)


def intervals_from_stats(stats: Sequence[dict]) -> list[Interval]:
    """The monitor's published statistics (``stats`` topic records, ``StatsRecord``) as
    ``Interval``s: the mean end-to-end latency of the events completed in the interval."""
    return [
        Interval(
            index=int(s["interval"]),
            input_events=float(s["input_events"]),
            latency_ms=s.get("latency_ms_mean"),
            backlog=sum(float(o["queued"]) for o in s["operators"].values()),
        )
        for s in stats
    ]
