"""Stela as a policy (``stela-slides.txt``): a replica budget, handed out by ETP.

Each interval the budget (the whole pool unless ``--budget`` or a budget schedule says
otherwise) is allocated from the operators' minimums: every slot goes to the congested
operator of highest ETP under the observed input rate plus the backlog to drain (slides
9-13). Stela itself scales only on demand; this makes it react to congestion too.
"""

from __future__ import annotations

from dataclasses import dataclass

from elastic_sps.control import stela
from elastic_sps.model.interval_stats import IntervalStats
from elastic_sps.model.topology import Topology
from elastic_sps.policies.base import Analysis, OperatorDecision, PolicyConfigError


@dataclass
class StelaPolicy:
    topology: Topology
    budget: int | None = None
    name: str = "stela"

    def __post_init__(self) -> None:
        if self.budget is not None and self.budget < 0:
            raise PolicyConfigError(f"stela: budget must be >= 0, got {self.budget}")

    def analyze(self, stats: IntervalStats) -> Analysis:
        budget = self.topology.pool_total if self.budget is None else self.budget
        backlog = sum(stats.operators[n].queued for n in self.topology.entry_operators)
        rate = (stats.input_events + backlog) / stats.td
        base = {op.name: op.min_replicas for op in self.topology.operators}
        floor = sum(base.values())
        if budget < floor:
            raise ValueError(f"budget {budget} is below the sum of min_replicas ({floor})")
        # Slots go by ETP until nothing is congested (scale_out stops there by itself).
        needed, _ = stela.scale_out(self.topology, rate, base, budget - floor)
        ops = {n: OperatorDecision(needed[n]) for n in self.topology.names}
        return Analysis(stats.index, stats.input_events, ops)
