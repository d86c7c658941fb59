"""The Plan step (PA-SPS Algorithm 2), shared by the simulator and the plan service.

The policy's per-operator needs are bounded by each pool, then calmed by the optional
stabiliser (``shared.stabilise``: scale-down window, maximum step); if a global budget is
set and the needs exceed it, Stela's ETP decides who gets the replicas
(``shared.stela.allocate``): the budget is the one hard limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from shared import stela
from shared.policies.base import Analysis
from shared.stabilise import Backlog, Stabiliser
from shared.topology import Topology


@dataclass(frozen=True)
class Plan:
    interval: int
    targets: Mapping[str, int]  # active replicas per operator for t+1
    changes: Mapping[str, int]  # k_i = target - current (Algorithm 2, line 2), non-zero only
    budget_bound: bool = False
    limited: Mapping[str, str] = field(default_factory=dict)  # operator -> rule that limited it


def make_plan(
    topo: Topology,
    analysis: Analysis,
    current: Mapping[str, int],
    td: float,
    budget: int | None = None,
    stabiliser: Stabiliser | None = None,
    backlog: Mapping[str, Backlog] | None = None,
) -> Plan:
    """``backlog`` (per operator) feeds the stabiliser's backlog rule."""
    wanted = {
        op.name: max(op.min_replicas, min(op.max_replicas, analysis.operators[op.name].replicas))
        for op in topo.operators
    }
    limited: dict[str, str] = {}
    if stabiliser is not None:
        raw = {n: d.raw_replicas for n, d in analysis.operators.items()}
        wanted, limited = stabiliser.apply(current, wanted, raw, backlog, td)
    bound = False
    if budget is not None and sum(wanted.values()) > budget:
        asked = wanted
        wanted = stela.allocate(topo, analysis.predicted_input / td, asked, budget)
        bound = True
        # the budget limited an operator that got fewer than it asked for
        limited.update({n: "budget" for n in wanted if wanted[n] < asked[n]})
    changes = {n: wanted[n] - current.get(n, 0) for n in wanted if wanted[n] != current.get(n, 0)}
    return Plan(analysis.interval, wanted, changes, bound, limited)
