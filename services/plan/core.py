"""Plan: an analysis in, a plan out (Algorithm 2 with pool bounds and the budget, shared
with the simulator through ``elastic_sps.control.plan.make_plan``)."""

from __future__ import annotations

import math
import time

from elastic_sps.contracts.analysis import AnalysisRecord
from elastic_sps.contracts.base import ContractError
from elastic_sps.contracts.decision import DecisionRecord
from elastic_sps.contracts.plan import PlanRecord
from elastic_sps.control.plan import make_plan
from elastic_sps.control.stabilise import Backlog, Stabilisation, Stabiliser
from elastic_sps.model.topology import Topology
from elastic_sps.policies.base import Analysis, OperatorDecision


class Planner:
    def __init__(
        self,
        topology: Topology,
        budget: int | None = None,
        rules: Stabilisation | None = None,
        latency_goal_ms: float | None = None,
        cores: float | None = None,
    ) -> None:
        """``rules``: the stabiliser's (``stabilise.build_rules``); none: no stabiliser."""
        self.topology = topology
        self.budget = budget
        self.rules = rules or Stabilisation()
        self.goal_s = latency_goal_ms / 1000.0 if latency_goal_ms is not None else None
        self.cores = cores
        self._stabiliser = Stabiliser(self.rules) if self.rules.enabled else None

    def plan(self, rec: AnalysisRecord) -> PlanRecord:
        missing = set(self.topology.names) - set(rec.operators)
        if missing:
            raise ContractError(f"analysis {rec.interval} lacks operators {sorted(missing)}")
        analysis = Analysis(
            rec.interval,
            rec.predicted_input,
            {
                n: OperatorDecision(o.replicas, o.predicted_load, o.raw_replicas)
                for n, o in rec.operators.items()
            },
        )
        current = {n: o.current for n, o in rec.operators.items()}
        backlog = {n: Backlog(o.queued, o.predicted_load, o.et_s) for n, o in rec.operators.items()}
        stabiliser = self._stabiliser
        p = make_plan(
            self.topology,
            analysis,
            current,
            rec.td,
            self.budget,
            stabiliser,
            backlog,
            self.goal_s,
            self.cores,
        )
        return PlanRecord(
            plan_id=f"interval-{rec.interval}",
            interval=rec.interval,
            targets=dict(p.targets),
            changes=dict(p.changes),
            budget_bound=p.budget_bound,
            limited=dict(p.limited),
            closed_at=rec.closed_at,
            decided_at=time.time(),
            short=list(p.short),
        )


def decisions(
    topo: Topology, rec: AnalysisRecord, plan: PlanRecord, dry_run: bool = False
) -> list[DecisionRecord]:
    """Per operator: the policy's inputs and rule, what it asked, what the plan chose and
    what limited it (its pool, the budget, the stabiliser)."""
    out = []
    for op in topo.operators:
        need = rec.operators[op.name]
        limited_by = []
        if op.name in plan.limited:
            limited_by.append(plan.limited[op.name])
        by_other = plan.limited.get(op.name) in ("budget", "cores")  # not the pool, then
        beyond = math.ceil(need.raw_replicas - 1e-9) > op.max_replicas
        if beyond or (op.name in plan.short and not by_other):
            limited_by.insert(0, "pool")
        out.append(
            DecisionRecord(
                interval=rec.interval,
                operator=op.name,
                policy=rec.policy,
                current=need.current,
                asked=need.replicas,
                raw=need.raw_replicas,
                chosen=plan.targets[op.name],
                rule=need.rule,
                inputs=need.inputs,
                limited_by=limited_by,
                pool=(op.min_replicas, op.max_replicas),
                dry_run=dry_run,
                closed_at=rec.closed_at,
            )
        )
    return out
