"""Interval-stepped (td) fluid simulation of a DAG under an elasticity policy.

Per interval: events arrive at the entry operators, each operator (in topological order)
processes min(queue + received, active × td / et) and forwards its output along its edges
within the same interval; the rest waits in its queue. At the end of the interval the MAPE
loop runs the *same* policy (Analyze) and ``make_plan`` (Plan) as the services; the new
active counts take effect at the next interval (a replica pool: no restart, no loss).
Counts are fluid (fractional events), which is what the model's equations describe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from shared import pa_sps_model as model
from shared.interval_stats import IntervalStats, OperatorStats
from shared.plan import make_plan
from shared.policies.base import Policy
from shared.run_metrics import RunMetrics, summarise
from shared.topology import SOURCE, Topology


@dataclass(frozen=True)
class EngineModel:
    """What the engine being forecast adds to the fluid model (defaults: none).

    ``hop_s``: the time an event spends per operator beyond its own et and queue in a
    micro-batch engine: waiting for the operator's next batch and for the batch to end.
    ``efficiency``: the share of a replica's 1/et the engine delivers (the rest goes to
    per-batch planning and commits). Both are calibrated from the live system: ``hop_s``
    from the end-to-end latency at low load divided by the hops, ``efficiency`` from
    ``benchmarks/bench_capacity.py`` (README, "Simulator beside the live system")."""

    hop_s: float = 0.0
    efficiency: float = 1.0


@dataclass
class Series:
    """The time series behind the metrics, one entry per interval."""

    input_events: list[float] = field(default_factory=list)
    predicted_input: list[float] = field(default_factory=list)  # made at t for t+1
    received: list[float] = field(default_factory=list)  # Σ_i λ_i^r(t)
    processed: list[float] = field(default_factory=list)  # Σ_i μ_i(t)
    entry_processed: list[float] = field(default_factory=list)
    queued: list[float] = field(default_factory=list)
    latency_ms: list[float] = field(default_factory=list)
    sink_processed: list[float] = field(default_factory=list)
    replicas: dict[str, list[int]] = field(default_factory=dict)
    planned: list[int] = field(default_factory=list)  # Σ replicas planned at t for t+1
    needed: list[int] = field(default_factory=list)  # Σ replicas t's real load needed

    def total_replicas(self) -> np.ndarray:
        return np.sum([np.asarray(v) for v in self.replicas.values()], axis=0)


@dataclass
class SimulationResult:
    policy: str
    metrics: RunMetrics
    series: Series
    td: float


def simulate(
    topo: Topology,
    arrivals: np.ndarray,
    policy: Policy,
    td: float,
    budget: int | None = None,
    initial: Mapping[str, int] | None = None,
    budget_at: Callable[[int], int | None] | None = None,
    engine: EngineModel | None = None,
) -> SimulationResult:
    """Run ``arrivals`` (events per interval) through ``topo``.

    ``budget_at(t)`` (optional) overrides ``budget`` per interval, to replay on-demand
    budget changes (Stela).
    """
    engine = engine or EngineModel()
    order = topo.order
    ops = [topo[n] for n in order]
    preds = [[(e.src, e.fraction) for e in topo.predecessors[n]] for n in order]
    entry = set(topo.entry_operators)
    sinks = set(topo.sinks)
    if initial is None:
        # A policy may say where it starts (static r = N starts at N, not at the minimum).
        initial = getattr(policy, "initial_replicas", lambda: None)()
    active = dict(initial) if initial else {op.name: op.min_replicas or 1 for op in ops}
    queue = dict.fromkeys(order, 0.0)
    sojourn = dict.fromkeys(order, 0.0)
    s = Series(replicas={n: [] for n in topo.names})
    prev_prediction: float | None = None
    for t, lam_g in enumerate(arrivals.tolist()):
        out: dict[str, float] = {SOURCE: lam_g}
        op_stats: dict[str, OperatorStats] = {}
        tot_recv = tot_proc = tot_q = entry_proc = sink_proc = 0.0
        lat_weighted = 0.0
        delay: dict[str, float] = {SOURCE: 0.0}
        needed = 0
        for op, pr in zip(ops, preds, strict=True):
            name = op.name
            rfrom = {p: out[p] * f for p, f in pr}
            recv = sum(rfrom.values())
            q0 = queue[name]
            avail = q0 + recv
            r = active[name]
            rate = engine.efficiency * r / op.et_s  # events/s
            proc = min(avail, rate * td)
            q1 = avail - proc
            queue[name] = q1
            out[name] = proc
            # Fluid Little's law: mean wait = mean backlog / service rate.
            wait = ((q0 + q1) / 2) / rate if rate > 0 else 0.0
            up = sum(rfrom.values())
            upstream = sum(rfrom[p] * delay[p] for p in rfrom) / up if up > 0 else 0.0
            delay[name] = upstream + wait + op.et_s + engine.hop_s
            sojourn[name] = delay[name]
            needed += model.round_replicas(
                model.replicas_needed(avail, op.et_s, td), op.min_replicas, op.max_replicas
            )
            op_stats[name] = OperatorStats(
                received=recv,
                processed=proc,
                queued=q1,
                received_from=rfrom,
                emitted=proc * sum(e.fraction for e in topo.successors[name]),
                active_replicas=r,
                et_s=op.et_s,
                busy_s=proc * op.et_s,
            )
            tot_recv += recv
            tot_proc += proc
            tot_q += q1
            if name in entry:
                entry_proc += proc
            if name in sinks:
                sink_proc += proc
                lat_weighted += proc * delay[name]
            s.replicas[name].append(r)
        latency_ms = 1000.0 * lat_weighted / sink_proc if sink_proc > 0 else 0.0
        stats = IntervalStats(t, td, lam_g, op_stats, latency_ms)
        analysis = policy.analyze(stats)
        b = budget_at(t) if budget_at is not None else budget
        plan = make_plan(topo, analysis, active, td, b)
        active = dict(plan.targets)
        s.input_events.append(lam_g)
        s.predicted_input.append(prev_prediction if prev_prediction is not None else lam_g)
        prev_prediction = analysis.predicted_input
        s.received.append(tot_recv)
        s.processed.append(tot_proc)
        s.entry_processed.append(entry_proc)
        s.queued.append(tot_q)
        s.sink_processed.append(sink_proc)
        s.latency_ms.append(latency_ms)
        s.needed.append(needed)
        s.planned.append(sum(plan.targets.values()))
    return SimulationResult(policy.name, summarise(topo, s), s, td)
