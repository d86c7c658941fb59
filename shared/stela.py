"""Stela's Effective Throughput Percentage and on-demand scaling (Xu, Peng, Gupta, IC2E 2016;
``stela-slides.txt`` slides 6-16).

Rates are events/s. An operator is *congested* when its input rate exceeds its capacity
(replicas / et). The ETP of an operator is the throughput of the sinks it reaches through
uncongested operators only, over the throughput of all sinks (slide 7).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shared.topology import SOURCE, Topology

_TOL = 1e-9


@dataclass(frozen=True)
class Flow:
    inflow: dict[str, float]
    throughput: dict[str, float]
    congested: frozenset[str]

    def sink_total(self, topo: Topology) -> float:
        return sum(self.throughput[s] for s in topo.sinks)


def flow(topo: Topology, input_eps: float, replicas: Mapping[str, int]) -> Flow:
    """Steady-state rates when every operator processes min(input, capacity)."""
    inflow: dict[str, float] = {}
    thr: dict[str, float] = {SOURCE: input_eps}
    congested = set()
    for name in topo.order:
        rate = sum(thr[e.src] * e.fraction for e in topo.predecessors[name])
        cap = replicas[name] / topo[name].et_s
        inflow[name] = rate
        thr[name] = min(rate, cap)
        if rate > cap * (1 + _TOL):
            congested.add(name)
    del thr[SOURCE]
    return Flow(inflow, thr, frozenset(congested))


def etp(topo: Topology, fl: Flow) -> dict[str, float]:
    total = fl.sink_total(topo)
    reach: dict[str, frozenset[str]] = {}
    for name in reversed(topo.order):  # sinks first
        sinks: set[str] = {name} if not topo.successors[name] else set()
        for e in topo.successors[name]:
            if e.dst not in fl.congested:
                sinks |= reach[e.dst]
        reach[name] = frozenset(sinks)
    if total <= 0:
        return {n: 0.0 for n in topo.order}
    return {n: sum(fl.throughput[s] for s in reach[n]) / total for n in topo.order}


def scale_out(
    topo: Topology,
    input_eps: float,
    replicas: Mapping[str, int],
    slots: int,
    cap: Mapping[str, int] | None = None,
) -> tuple[dict[str, int], list[str]]:
    """Give ``slots`` replicas one at a time to the congested operator of highest ETP,
    recomputing rates and ETPs after each (slides 9-13). Ties go to the operator declared
    first. Stops early when no congested operator can take one more replica.
    Returns the new counts and the operators in the order they received a slot.
    """
    current = dict(replicas)
    limit = dict(cap) if cap is not None else {op.name: op.max_replicas for op in topo.operators}
    declared = {n: k for k, n in enumerate(topo.names)}
    given: list[str] = []
    for _ in range(slots):
        fl = flow(topo, input_eps, current)
        scores = etp(topo, fl)
        candidates = [n for n in fl.congested if current[n] < limit[n]]
        if not candidates:
            break
        best = min(candidates, key=lambda n: (-scores[n], declared[n]))
        current[best] += 1
        given.append(best)
    return current, given


def scale_in(
    topo: Topology, input_eps: float, replicas: Mapping[str, int], slots: int
) -> tuple[dict[str, int], list[str]]:
    """Take ``slots`` replicas away where the ETP is lowest (slides 14-16), ties going to
    the operator whose remaining replicas would be least utilised. Never below min.
    """
    current = dict(replicas)
    taken: list[str] = []
    for _ in range(slots):
        fl = flow(topo, input_eps, current)
        scores = etp(topo, fl)
        candidates = [op.name for op in topo.operators if current[op.name] > op.min_replicas]
        if not candidates:
            break

        def key(n: str, fl: Flow = fl, scores: dict[str, float] = scores) -> tuple[float, float]:
            remaining_cap = (current[n] - 1) / topo[n].et_s
            util = fl.inflow[n] / remaining_cap if remaining_cap > 0 else float("inf")
            return (scores[n], util)

        worst = min(candidates, key=key)
        current[worst] -= 1
        taken.append(worst)
    return current, taken


def allocate(
    topo: Topology, input_eps: float, wanted: Mapping[str, int], budget: int
) -> dict[str, int]:
    """Fit the replicas a policy asked for into a global budget: start every operator at
    its minimum and hand out the remaining slots by ETP (never above what was asked);
    slots left once nothing is congested go to operators still short of their ask, in
    ETP order, so queued backlogs still drain.
    """
    base = {op.name: op.min_replicas for op in topo.operators}
    floor = sum(base.values())
    if budget < floor:
        raise ValueError(f"budget {budget} is below the sum of min_replicas ({floor})")
    current, given = scale_out(topo, input_eps, base, budget - floor, cap=wanted)
    left = budget - floor - len(given)
    while left > 0:
        short = [n for n in topo.names if current[n] < wanted[n]]
        if not short:
            break
        scores = etp(topo, flow(topo, input_eps, current))
        best = max(short, key=lambda n: (scores[n], wanted[n] - current[n]))
        current[best] += 1
        left -= 1
    return current
