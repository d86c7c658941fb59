"""Shedding at ingress in the simulator (issue: one goal, scaling before shedding).

Two shedders decide, per interval, how much of λ_G(t) enters; the rest is shed:

* ``goal``: what the ensemble does. The ingress sheds only while the last plan was
  *short* (an operator's need for the goal exceeded its pool or budget,
  ``elastic_sps.control.plan``), and then admits what keeps the short operators' queues clearable
  within the goal with the replicas they have; the others the plan scales, so they do
  not limit what enters. Otherwise it admits everything.
* ``full``: Full Knowledge, the least any shedder can shed for the goal: it sees the
  exact queues and, as if the pool were already fully scaled out, admits what keeps
  every operator's queue clearable within the goal at its full pool, whether or not a
  plan said so. No scaling policy can give an operator more than its pool, so no
  shedder can admit more and meet the goal.

The bound: operator i serves ``cap_i = efficiency × r_i / et_i`` events/s and receives
θ_i per admitted event; with q_i queued now, admitting a keeps its queue at the end of
the interval within what it clears in the goal, q_i + θ_i·a − cap_i·td ≤ cap_i·goal, so
a ≤ (cap_i·(goal + td) − q_i) / θ_i (the plan's goal rule, ``elastic_sps.control.plan``, read for
the input instead of the replicas).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from elastic_sps.model.admission import admissible
from elastic_sps.model.topology import Topology

SHEDDERS = ("goal", "full")


def admitted(
    kind: str,
    topo: Topology,
    arriving: float,
    active: Mapping[str, int],
    queued: Mapping[str, float],
    short: Collection[str],
    goal_s: float,
    td: float,
    efficiency: float = 1.0,
    path_s: float = 0.0,
) -> float:
    """How many of ``arriving`` events enter this interval under shedder ``kind``;
    ``short``: the operators the last plan was short for; ``path_s``: as ``admissible``."""
    if kind == "goal":
        if not short:
            return arriving
        bound = admissible(topo, active, queued, goal_s, td, efficiency, short, path_s)
        return min(arriving, bound)
    if kind == "full":
        pool = {op.name: op.max_replicas for op in topo.operators}
        return min(arriving, admissible(topo, pool, queued, goal_s, td, efficiency, None, path_s))
    raise ValueError(f"unknown shedder {kind!r}; choose from {SHEDDERS}")
