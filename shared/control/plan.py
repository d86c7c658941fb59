"""The Plan step (PA-SPS Algorithm 2), shared by the simulator and the plan service.

The policy's per-operator needs are raised, if the user set a latency goal, to the
replicas that clear each operator's backlog within the goal (``goal_replicas``), bounded
by each pool, then calmed by the optional stabiliser (``elastic_sps.control.stabilise``: scale-down
window, margin, backlog, maximum step); if a global budget is set and the needs exceed
it, Stela's ETP decides who gets the replicas (``elastic_sps.control.stela.allocate``): the
budget is the one hard limit. An operator whose need exceeds its pool or its share of the budget is
**short**: only then may the ingress shed (scaling before shedding).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from elastic_sps.control import stela
from elastic_sps.control.stabilise import Backlog, Stabiliser
from elastic_sps.model.analysis import Analysis
from elastic_sps.model.topology import Topology


@dataclass(frozen=True)
class Plan:
    interval: int
    targets: Mapping[str, int]  # active replicas per operator for t+1
    changes: Mapping[str, int]  # k_i = target - current (Algorithm 2, line 2), non-zero only
    budget_bound: bool = False
    limited: Mapping[str, str] = field(default_factory=dict)  # operator -> rule that limited it
    short: tuple[str, ...] = ()  # operators whose need the pool or the budget cannot meet


def goal_replicas(b: Backlog, td: float, goal_s: float) -> int:
    """The replicas that keep the goal: the queue cleared within ``goal_s`` while the next
    interval's predicted input is processed as it arrives,
    ``ceil(queued·et / goal + predicted·et / td)``. Why this form: an event that joins the
    queue waits for those before it, so the queue's work, spread over r replicas, must
    take at most the goal; the new input needs its own share of r."""
    return math.ceil(b.queued * b.et_s / goal_s + b.predicted * b.et_s / td - 1e-9)


def make_plan(
    topo: Topology,
    analysis: Analysis,
    current: Mapping[str, int],
    td: float,
    budget: int | None = None,
    stabiliser: Stabiliser | None = None,
    backlog: Mapping[str, Backlog] | None = None,
    goal_s: float | None = None,
    cores: float | None = None,
) -> Plan:
    """``backlog`` (per operator) feeds the stabiliser's backlog rule and the goal;
    ``goal_s``: the user's latency goal, None for the policy's needs as they are;
    ``cores``: what CPU-bound operators' replicas run on (None: not limited), so the plan
    never counts on more of their capacity than the cores hold (``limited: cores``)."""
    asked = {n: d.replicas for n, d in analysis.operators.items()}
    limited: dict[str, str] = {}
    if goal_s is not None and backlog:
        for n, b in backlog.items():
            if n in asked and (g := goal_replicas(b, td, goal_s)) > asked[n]:
                asked[n], limited[n] = g, "latency goal"
    pool = {op.name: op.max_replicas for op in topo.operators}
    if cores is not None:
        for n, fit in topo.core_replicas(cores).items():
            # whole replicas, to the nearest: 1.97 cores' worth is 2 replicas, not 1
            cap = max(1, math.floor(fit + 0.5))
            if cap < pool[n]:
                pool[n] = cap
                if asked[n] > cap:
                    limited[n] = "cores"
    short = {op.name for op in topo.operators if asked[op.name] > pool[op.name]}
    wanted = {
        op.name: max(min(op.min_replicas, pool[op.name]), min(pool[op.name], asked[op.name]))
        for op in topo.operators
    }
    if stabiliser is not None:
        raw = {n: d.raw_replicas for n, d in analysis.operators.items()}
        wanted, calmed = stabiliser.apply(current, wanted, raw, backlog, td)
        limited.update(calmed)
    bound = False
    if budget is not None and sum(wanted.values()) > budget:
        before = wanted
        wanted = stela.allocate(topo, analysis.predicted_input / td, before, budget)
        bound = True
        # the budget limited an operator that got fewer than it asked for
        cut = {n for n in wanted if wanted[n] < before[n]}
        limited.update(dict.fromkeys(cut, "budget"))
        short |= cut
    changes = {n: wanted[n] - current.get(n, 0) for n in wanted if wanted[n] != current.get(n, 0)}
    return Plan(analysis.interval, wanted, changes, bound, limited, tuple(sorted(short)))
