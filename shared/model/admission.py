"""The admission bound both the simulator's ``goal`` shedder and the live ingress apply:
the most input one interval may admit with every queue still clearable within the goal
(``elastic_sps.simulation.sim_shedding`` says where it comes from)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from elastic_sps.model.topology import Topology


def admissible(
    topo: Topology,
    replicas: Mapping[str, int],
    queued: Mapping[str, float],
    goal_s: float,
    td: float,
    efficiency: float = 1.0,
    operators: Collection[str] | None = None,
    path_s: float = 0.0,
) -> float:
    """The most input events one interval may admit with the queue of every operator (of
    ``operators``; default all) still clearable within ``goal_s`` less ``path_s``, the
    time an event spends on its path beside the queues (module docstring)."""
    wait_s = max(0.0, goal_s - path_s)
    bound = float("inf")
    for op in topo.operators:
        if operators is not None and op.name not in operators:
            continue
        theta = topo.static_theta[op.name]
        if theta <= 0:
            continue
        cap = efficiency * replicas[op.name] / op.et_s
        bound = min(bound, (cap * (wait_s + td) - queued.get(op.name, 0.0)) / theta)
    return max(0.0, bound)
