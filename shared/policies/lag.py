"""A KEDA-style lag policy: the Kafka scaler's rule, replicas = ceil(lag / lagThreshold),
capped at the pool (KEDA's ``lagThreshold``, per operator here; its default of 10 is sized
for slow consumers, so ours defaults to 1,000 events)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from elastic_sps.model.interval_stats import IntervalStats
from elastic_sps.model.topology import Topology
from elastic_sps.policies.base import Analysis, OperatorDecision, PolicyConfigError


@dataclass
class LagPolicy:
    topology: Topology
    lag_threshold: float = 1000.0
    name: str = "lag"

    def __post_init__(self) -> None:
        if self.lag_threshold <= 0:
            raise PolicyConfigError(f"lag: lag_threshold must be > 0, got {self.lag_threshold}")

    def analyze(self, stats: IntervalStats) -> Analysis:
        ops = {}
        for op in self.topology.operators:
            lag = stats.operators[op.name].queued
            raw = lag / self.lag_threshold
            n = max(op.min_replicas, 1, min(op.max_replicas, math.ceil(raw)))
            ops[op.name] = OperatorDecision(n, lag, raw)
        return Analysis(stats.index, stats.input_events, ops)
