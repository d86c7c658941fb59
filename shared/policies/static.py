"""The fixed-replica baseline (Storm with r = 1, 4, 8 in PA-SPS §4.3, Table 3)."""

from __future__ import annotations

from dataclasses import dataclass

from elastic_sps.model.interval_stats import IntervalStats
from elastic_sps.model.topology import Topology
from elastic_sps.policies.base import Analysis, OperatorDecision, PolicyConfigError


@dataclass
class Static:
    """Every operator keeps ``replicas`` active replicas, bounded by its pool."""

    topology: Topology
    replicas: int = 1
    name: str = "static"

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise PolicyConfigError(f"static: --replicas must be >= 1, got {self.replicas}")

    def initial_replicas(self) -> dict[str, int]:
        return {
            op.name: max(op.min_replicas, min(op.max_replicas, self.replicas))
            for op in self.topology.operators
        }

    def analyze(self, stats: IntervalStats) -> Analysis:
        ops = {
            op.name: OperatorDecision(
                replicas=max(op.min_replicas, min(op.max_replicas, self.replicas)),
                raw_replicas=float(self.replicas),
            )
            for op in self.topology.operators
        }
        return Analysis(stats.index, stats.input_events, ops)
