"""A reactive threshold policy (the rule of most cloud autoscalers): one replica more when
utilisation or backlog stays above its high mark for ``k`` intervals, one less when
utilisation stays below the low mark with no backlog for ``k`` intervals."""

from __future__ import annotations

from dataclasses import dataclass

from elastic_sps.model.interval_stats import IntervalStats
from elastic_sps.model.topology import Topology
from elastic_sps.policies.base import Analysis, OperatorDecision, PolicyConfigError


@dataclass
class Reactive:
    topology: Topology
    high: float = 0.8
    low: float = 0.3
    queue_high: float = 100.0
    k: int = 2
    name: str = "reactive"

    def __post_init__(self) -> None:
        if not 0 <= self.low < self.high:
            raise PolicyConfigError(f"reactive: need 0 <= low < high, got {self.low}, {self.high}")
        if self.k < 1:
            raise PolicyConfigError("reactive: k must be >= 1")
        self._above = dict.fromkeys(self.topology.names, 0)
        self._below = dict.fromkeys(self.topology.names, 0)

    def analyze(self, stats: IntervalStats) -> Analysis:
        ops = {}
        for op in self.topology.operators:
            s = stats.operators[op.name]
            r = max(1, s.active_replicas)
            util = (s.busy_s if s.busy_s > 0 else s.processed * op.et_s) / (stats.td * r)
            hot = util > self.high or s.queued > self.queue_high
            cold = util < self.low and s.queued == 0
            self._above[op.name] = self._above[op.name] + 1 if hot else 0
            self._below[op.name] = self._below[op.name] + 1 if cold else 0
            target = r
            if self._above[op.name] >= self.k:
                target, self._above[op.name] = r + 1, 0
            elif self._below[op.name] >= self.k:
                target, self._below[op.name] = r - 1, 0
            target = max(op.min_replicas, 1, min(op.max_replicas, target))
            ops[op.name] = OperatorDecision(target, s.received + s.queued, util)
        return Analysis(stats.index, stats.input_events, ops)
