"""What a simulation accumulates: one interval's tally and the run's per-interval series
(``elastic_sps.simulation.run_metrics`` summarises them)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from elastic_sps.model.interval_stats import OperatorStats


@dataclass
class Series:
    """The time series behind the metrics, one entry per interval."""

    input_events: list[float] = field(default_factory=list)
    predicted_input: list[float] = field(default_factory=list)  # made at t for t+1
    received: list[float] = field(default_factory=list)  # Σ_i λ_i^r(t)
    processed: list[float] = field(default_factory=list)  # Σ_i μ_i(t)
    entry_processed: list[float] = field(default_factory=list)
    queued: list[float] = field(default_factory=list)
    latency_ms: list[float] = field(default_factory=list)  # mean over completions at t
    sink_processed: list[float] = field(default_factory=list)
    completed: list[float] = field(default_factory=list)  # at the sinks, in input events
    latency_sum_s: list[float] = field(default_factory=list)  # Σ latency of completed
    expired: list[float] = field(default_factory=list)  # Σ over operators
    dropped: list[float] = field(default_factory=list)
    shed: list[float] = field(default_factory=list)  # at ingress (``sim_shedding``)
    replicas: dict[str, list[int]] = field(default_factory=dict)
    planned: list[int] = field(default_factory=list)  # Σ replicas planned at t for t+1
    needed: list[int] = field(default_factory=list)  # Σ replicas t's real load needed
    replay_intervals: int = 0  # intervals of the trace itself (the rest is a drain)

    def total_replicas(self) -> np.ndarray:
        return np.sum([np.asarray(v) for v in self.replicas.values()], axis=0)


@dataclass
class IntervalTally:
    """One interval's accumulators, kept apart so ``simulate`` stays readable."""

    ops: dict[str, OperatorStats] = field(default_factory=dict)
    received: float = 0.0
    processed: float = 0.0
    queued: float = 0.0
    entry: float = 0.0
    sink: float = 0.0
    latency_s: float = 0.0
    expired: float = 0.0
    dropped: float = 0.0
    needed: int = 0
