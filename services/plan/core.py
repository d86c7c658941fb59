"""Plan: an analysis in, a plan out (Algorithm 2 with pool bounds and the budget, shared
with the simulator through ``shared.plan.make_plan``)."""

from __future__ import annotations

from shared.contracts.analysis import AnalysisRecord
from shared.contracts.plan import PlanRecord
from shared.plan import make_plan
from shared.policies.base import Analysis, OperatorDecision
from shared.topology import Topology


class Planner:
    def __init__(self, topology: Topology, budget: int | None = None) -> None:
        self.topology = topology
        self.budget = budget

    def plan(self, rec: AnalysisRecord) -> PlanRecord:
        missing = set(self.topology.names) - set(rec.operators)
        if missing:
            raise ValueError(f"analysis {rec.interval} lacks operators {sorted(missing)}")
        analysis = Analysis(
            rec.interval,
            rec.predicted_input,
            {n: OperatorDecision(o.replicas, o.predicted_load) for n, o in rec.operators.items()},
        )
        current = {n: o.current for n, o in rec.operators.items()}
        p = make_plan(self.topology, analysis, current, rec.td, self.budget)
        return PlanRecord(
            plan_id=f"interval-{rec.interval}",
            interval=rec.interval,
            targets=dict(p.targets),
            changes=dict(p.changes),
            budget_bound=p.budget_bound,
            closed_at=rec.closed_at,
        )
