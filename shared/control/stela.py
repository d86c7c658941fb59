"""Stela's Effective Throughput Percentage and on-demand scaling (Xu, Peng, Gupta, IC2E 2016;
``stela-slides.txt`` slides 6-16).

Rates are events/s. An operator is *congested* when its input rate exceeds its capacity
(replicas / et). The ETP of an operator is the throughput of the sinks it reaches through
uncongested operators only, over the throughput of all sinks (slide 7).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from elastic_sps.model.topology import SOURCE, Topology

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


Placement = dict[str, list[str]]  # machine -> the operator of each instance on it


def round_robin_placement(
    topo: Topology, replicas: Mapping[str, int], machine_slots: int
) -> Placement:
    """Storm's default scheduler: instances dealt round-robin over just enough machines of
    ``machine_slots`` slots each, operators in topological order."""
    if machine_slots < 1:
        raise ValueError(f"machine_slots must be >= 1, got {machine_slots}")
    instances = [n for n in topo.order for _ in range(replicas[n])]
    machines = max(1, -(-len(instances) // machine_slots))
    placement: Placement = {f"m{k}": [] for k in range(machines)}
    for k, name in enumerate(instances):
        placement[f"m{k % machines}"].append(name)
    return placement


def etp_sums(topo: Topology, input_eps: float, placement: Placement) -> dict[str, float]:
    """Slide 14, step 1: a machine's ETPSum, the ETPs of the instances it hosts."""
    scores = etp(topo, flow(topo, input_eps, _counts(topo, placement)))
    return {m: sum(scores[n] for n in ops) for m, ops in placement.items()}


def remove_machine(
    topo: Topology, input_eps: float, placement: Placement, machine_slots: int
) -> tuple[str, Placement, list[str]]:
    """Slides 14-16: remove the machine with the lowest ETPSum (step 2) and deal its
    instances round-robin over the others, lowest ETPSum first (step 3). Returns the
    machine removed, the new placement and the instances retired.

    Ours: a replica is a slot here (Storm would run the moved executors as extra threads
    on full machines), so an instance that finds no free slot on any machine is retired;
    the removed machine's instances are dealt in falling ETP order, so the ones retired
    are those whose operators contribute least; and no operator goes below its minimum
    (its last instances are placed over capacity, as Storm would)."""
    if len(placement) < 2:
        raise ValueError("cannot remove the only machine")
    sums = etp_sums(topo, input_eps, placement)
    victim = min(placement, key=lambda m: (sums[m], m))
    ranked = sorted((m for m in placement if m != victim), key=lambda m: (sums[m], m))
    new: Placement = {m: list(placement[m]) for m in ranked}
    scores = etp(topo, flow(topo, input_eps, _counts(topo, placement)))
    moving = sorted(placement[victim], key=lambda n: (-scores[n], topo.order.index(n)))
    retired: list[str] = []
    cursor = 0  # round robin over the ranked machines, skipping full ones
    for name in moving:
        turn = ranked[cursor:] + ranked[:cursor]
        target = next((m for m in turn if len(new[m]) < machine_slots), None)
        if target is None:
            if _counts(topo, new)[name] >= topo[name].min_replicas:
                retired.append(name)
                continue
            target = turn[0]  # over capacity, to keep the operator at its minimum
        new[target].append(name)
        cursor = (ranked.index(target) + 1) % len(ranked)
    return victim, new, retired


def _counts(topo: Topology, placement: Placement) -> dict[str, int]:
    counts = {n: 0 for n in topo.names}
    for ops in placement.values():
        for n in ops:
            counts[n] += 1
    return counts


def scale_in_machines(
    topo: Topology,
    input_eps: float,
    replicas: Mapping[str, int],
    slots: int,
    machine_slots: int,
) -> tuple[dict[str, int], list[str]]:
    """On-demand scale-in by whole machines (slides 14-16): from Storm's round-robin
    placement of ``replicas``, remove machines of ``machine_slots`` slots, lowest ETPSum
    first, until ``slots`` slots are gone; returns the counts left and the machines
    removed."""
    placement = round_robin_placement(topo, replicas, machine_slots)
    removed: list[str] = []
    capacity = len(placement) * machine_slots
    while len(placement) > 1 and len(placement) * machine_slots > capacity - slots:
        victim, placement, _ = remove_machine(topo, input_eps, placement, machine_slots)
        removed.append(victim)
    return _counts(topo, placement), removed


def scale_in(
    topo: Topology, input_eps: float, replicas: Mapping[str, int], slots: int
) -> tuple[dict[str, int], list[str]]:
    """Take ``slots`` replicas away where the ETP is lowest, one replica at a time, ties
    going to the operator whose remaining replicas would be least utilised; never below
    min. (Stela's slides remove whole machines: ``scale_in_machines``.)
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
