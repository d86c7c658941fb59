"""The execution time a policy sizes an operator with: max(benchmark, observed).

The PA-SPS authors' code (adaptive-sps-storm, tag ``pa-sps``) sizes each operator with the
larger of its benchmarked execution time and the one it observed in the last interval:
the benchmark guards against an idle interval's optimistic figure, the observation
against a benchmark the live system does not meet (queueing for a remote call, a slower
machine). The benchmark is the declared ``et_ms`` until a measured one is set.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from elastic_sps.model.interval_stats import IntervalStats
from elastic_sps.model.topology import Topology

# An interval with fewer processed events says little about the cost: keep the last one.
MIN_EVENTS = 10


@dataclass
class ExecutionTimes:
    topology: Topology
    benchmark_s: dict[str, float] = field(default_factory=dict)
    observed_s: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for op in self.topology.operators:
            self.benchmark_s.setdefault(op.name, op.et_s)

    def observe(self, stats: IntervalStats) -> None:
        """Busy time per processed event, per operator, from the interval's counters."""
        for name, s in stats.operators.items():
            if name in self.benchmark_s and s.processed >= MIN_EVENTS and s.busy_s > 0:
                self.observed_s[name] = s.busy_s / s.processed

    def et_s(self, operator: str) -> float:
        return max(self.benchmark_s[operator], self.observed_s.get(operator, 0.0))
