"""Interval-stepped (td) fluid simulation of a DAG under an elasticity policy.

Per interval: events arrive at the entry operators spread over the interval; each
operator (in topological order) serves its FIFO queue of *cohorts* (``fluid_queue``) at
``active × efficiency / et`` events/s and forwards what it completes along its edges, where
it waits until it is ready (a micro-batch engine adds ``hop_s`` per operator, so an output
may only be served in a later interval). Events older than ``t_out`` expire at the
operator that would serve them; a queue beyond ``q_size`` drops its newest events
(PA-SPS §4.1.4: t_out = 30 s, q_size = 100,000 in the paper's scenario). At the end of the
interval the MAPE loop runs the *same* policy (Analyze) and ``make_plan`` (Plan) as the
services; the new active counts take effect ``plan_delay`` intervals after the interval's
end (a replica pool: no restart, no loss). Counts are fluid (fractional events).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from elastic_sps.control.plan import make_plan
from elastic_sps.control.stabilise import Stabilisation, Stabiliser, backlogs
from elastic_sps.model import pa_sps_model as model
from elastic_sps.model.engine import EngineModel, Handover, Limits, keyed_move_loss
from elastic_sps.model.interval_stats import IntervalStats, OperatorStats
from elastic_sps.model.topology import SOURCE, Operator, Topology
from elastic_sps.policies.base import Policy
from elastic_sps.simulation import sim_shedding
from elastic_sps.simulation.fluid_queue import Cohort, OperatorQueue, coalesce, gg_c_wait
from elastic_sps.simulation.run_metrics import RunMetrics, summarise
from elastic_sps.simulation.sim_series import IntervalTally, Series

MODES = ("fluid", "event")


@dataclass
class SimulationResult:
    policy: str
    metrics: RunMetrics
    series: Series
    td: float
    mode: str = "fluid"
    events_per_s: float | None = None  # event mode: events handled per second of wall time


class Dataplane(Protocol):
    """What ``simulate`` asks of a data-plane model: serve one interval, filling ``acc``
    (per operator stats; entry and sink counts; the sinks' latency sum)."""

    handled: int  # events served, expired or dropped so far (event mode's events/s)

    def queued(self) -> float: ...

    def queued_by_operator(self) -> dict[str, float]: ...

    def step(
        self,
        t0: float,
        td: float,
        lam_g: float,
        active: Mapping[str, int],
        acc: IntervalTally,
        handover: Handover | None = None,
    ) -> None: ...


def _step_operator(
    topo: Topology,
    op: Operator,
    q: OperatorQueue,
    inbound: dict[str, list[Cohort]],
    r: int,
    t0: float,
    td: float,
    engine: EngineModel,
    limits: Limits,
    acc: IntervalTally,
    serving: float | None = None,
) -> list[Cohort]:
    """Queue what arrived, serve the interval with ``serving`` replicas (time-weighted;
    ``r``, the count at its end, by default), account for it; returns what completed."""
    serving = r if serving is None else serving
    if engine.cores is not None and op.cpu_bound:  # replicas beyond the cores add nothing
        serving = min(serving, topo.core_replicas(engine.cores)[op.name])
    rfrom = {p: sum(c.amount for c in cs) for p, cs in inbound.items()}
    recv = sum(rfrom.values())
    before = q.size
    for cs in inbound.values():
        q.add(cs)
    rate = engine.efficiency * serving / op.et_s
    # Load this interval can serve (backlog and what is ready before it ends) against
    # capacity: the G/G/c wait. An output still in its micro-batch hop is not offered yet.
    offered = sum(c.amount for c in q.cohorts if c.ready < t0 + td)
    rho = offered / (rate * td) if rate > 0 else 0.0
    post = op.et_s + engine.hop_s + gg_c_wait(rho, max(1, round(serving)), op.et_s, engine.et_cv2)
    served = q.serve(t0, td, rate, post, limits.t_out_s)
    served.processed = coalesce(served.processed, td)
    dropped = q.drop_beyond(limits.q_size) if limits.q_size is not None else 0.0
    proc = sum(c.amount for c in served.processed)
    queued = q.size
    # what the plan reads (``EngineModel.levels_in_flight``); the tallies keep the backlog
    seen = queued + recv / td * post if engine.levels_in_flight else queued
    acc.needed += model.round_replicas(
        model.replicas_needed(before + recv, op.et_s, td), op.min_replicas, op.max_replicas
    )
    fan_out = sum(e.fraction for e in topo.successors[op.name])
    acc.ops[op.name] = OperatorStats(
        received=recv,
        processed=proc,
        queued=seen,
        received_from=rfrom,
        emitted=proc * fan_out,
        active_replicas=r,
        et_s=op.et_s,
        busy_s=proc * op.et_s,
        expired=served.expired + dropped,
    )
    acc.received += recv
    acc.processed += proc
    acc.queued += queued
    acc.expired += served.expired
    acc.dropped += dropped
    return served.processed


class FluidDataplane:
    """The fluid data plane: each operator a FIFO queue of cohorts (``fluid_queue``)."""

    def __init__(self, topo: Topology, engine: EngineModel, limits: Limits) -> None:
        self.topo, self.engine, self.limits = topo, engine, limits
        self.queues = {n: OperatorQueue() for n in topo.order}
        self.entry, self.sinks = set(topo.entry_operators), set(topo.sinks)
        self.handled = 0

    def queued(self) -> float:
        return sum(q.size for q in self.queues.values())

    def queued_by_operator(self) -> dict[str, float]:
        return {n: q.size for n, q in self.queues.items()}

    def _serving(self, name: str, after: int, td: float, handover: Handover | None) -> float | None:
        """The replicas serving ``name`` over the interval (time-weighted through a
        handover), less what a keyed operator's move idles (``keyed_move_loss``)."""
        if handover is None:
            return None
        serving = handover.serving(name, after)
        op = self.topo[name]
        if op.stateful:
            before = handover.before[name]
            serving -= keyed_move_loss(op.max_replicas, before, after, self.engine, td)
        return max(0.0, serving)

    def step(
        self,
        t0: float,
        td: float,
        lam_g: float,
        active: Mapping[str, int],
        acc: IntervalTally,
        handover: Handover | None = None,
    ) -> None:
        """One interval [t0, t0 + td): λ_G arrives spread over it, every operator serves."""
        topo = self.topo
        done: dict[str, list[Cohort]] = {SOURCE: [Cohort(lam_g, t0 + td / 2, t0 + td / 2)]}
        for name in topo.order:
            inbound = {
                e.src: [Cohort(c.amount * e.fraction, c.born, c.ready) for c in done[e.src]]
                for e in topo.predecessors[name]
            }
            done[name] = _step_operator(
                topo,
                topo[name],
                self.queues[name],
                inbound,
                active[name],
                t0,
                td,
                self.engine,
                self.limits,
                acc,
                self._serving(name, active[name], td, handover),
            )
            proc = acc.ops[name].processed
            if name in self.entry:
                acc.entry += proc
            if name in self.sinks:
                acc.sink += proc
                acc.latency_s += sum(c.amount * (c.ready - c.born) for c in done[name])


def simulate(
    topo: Topology,
    arrivals: np.ndarray,
    policy: Policy,
    td: float,
    budget: int | None = None,
    initial: Mapping[str, int] | None = None,
    budget_at: Callable[[int], int | None] | None = None,
    engine: EngineModel | None = None,
    limits: Limits | None = None,
    drain_intervals: int = 0,
    stabilisation: Stabilisation | None = None,
    latency_goal_s: float | None = None,
    mode: str = "fluid",
    seed: int = 0,
    shedder: str | None = None,
) -> SimulationResult:
    """Run ``arrivals`` (events per interval) through ``topo``, then up to
    ``drain_intervals`` quiet intervals while events are still queued (as a live run
    drains). ``budget_at(t)`` (optional) overrides ``budget`` per interval, to replay
    on-demand budget changes (Stela); ``stabilisation`` calms the plans and
    ``latency_goal_s`` raises their needs as the plan service does. ``mode`` is
    ``fluid`` (cohorts, fast) or ``event`` (every event, per-replica queues; ``seed``
    draws its arrival times, routing and execution times). ``shedder`` (``goal`` or
    ``full``, with a latency goal) sheds at ingress (``elastic_sps.simulation.sim_shedding``)."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: choose from {MODES}")
    if shedder is not None and latency_goal_s is None:
        raise ValueError("a shedder needs a latency goal")
    started = time.perf_counter()
    engine = engine or EngineModel()
    per_input = sum(topo.static_theta[n] for n in topo.sinks) or 1.0
    if initial is None:
        # A policy may say where it starts (static r = N starts at N, not at the minimum).
        initial = getattr(policy, "initial_replicas", lambda: None)()
    active = dict(initial) if initial else {n: topo[n].min_replicas or 1 for n in topo.order}
    whole = int(engine.plan_delay)
    pending: deque[dict[str, int]] = deque([dict(active)] * whole)
    arriving = dict(active)  # the counts that take effect ``late`` into this interval
    late = engine.plan_delay - whole
    dataplane = _dataplane(mode, topo, engine, limits or Limits(), seed)
    s = Series(replicas={n: [] for n in topo.names}, replay_intervals=len(arrivals))
    prev_prediction: float | None = None
    rules = stabilisation.at_td(td) if stabilisation else None
    stabiliser = Stabiliser(rules) if rules and rules.enabled else None
    short: tuple[str, ...] = ()  # the last plan's: only then may the goal shedder shed
    path_s = topo.path_seconds(engine.hop_s)  # what an event spends beside the queues
    t = 0
    while t < len(arrivals) or (t < len(arrivals) + drain_intervals and dataplane.queued() > 1e-6):
        lam_g = float(arrivals[t]) if t < len(arrivals) else 0.0
        acc = IntervalTally()
        handover = Handover(active, late)
        entering = lam_g
        if shedder is not None and latency_goal_s is not None:
            entering = sim_shedding.admitted(
                shedder,
                topo,
                lam_g,
                handover.holding(arriving),
                dataplane.queued_by_operator(),
                short,
                latency_goal_s,
                td,
                engine.efficiency,
                path_s,
            )
        s.shed.append(lam_g - entering)
        dataplane.step(t * td, td, entering, arriving, acc, handover)
        for name, n in handover.holding(arriving).items():
            s.replicas[name].append(n)
        active = arriving
        stats = IntervalStats(t, td, lam_g, acc.ops, _mean_ms(acc.latency_s, acc.sink))
        analysis = policy.analyze(stats)
        b = budget_at(t) if budget_at is not None else budget
        backlog = backlogs(stats, analysis)
        plan = make_plan(
            topo, analysis, active, td, b, stabiliser, backlog, latency_goal_s, engine.cores
        )
        short = plan.short
        pending.append(dict(plan.targets))
        arriving = pending.popleft()
        _record(s, acc, lam_g, per_input, prev_prediction, sum(plan.targets.values()))
        prev_prediction = analysis.predicted_input
        t += 1
    wall = time.perf_counter() - started
    rate = dataplane.handled / wall if mode == "event" and wall > 0 else None
    return SimulationResult(policy.name, summarise(topo, s, td), s, td, mode, rate)


def _dataplane(
    mode: str, topo: Topology, engine: EngineModel, limits: Limits, seed: int
) -> Dataplane:
    """The fluid model (cohorts), or every event through per-replica queues."""
    if mode == "fluid":
        return FluidDataplane(topo, engine, limits)
    # Imported here: the event data plane builds on this module's engine model.
    from elastic_sps.simulation.event_dataplane import EventDataplane

    return EventDataplane(topo, engine, limits, seed)


def _mean_ms(latency_s: float, n: float) -> float:
    return 1000.0 * latency_s / n if n > 0 else 0.0


def _record(
    s: Series,
    acc: IntervalTally,
    lam_g: float,
    per_input: float,
    prev_prediction: float | None,
    planned: int,
) -> None:
    s.input_events.append(lam_g)
    s.predicted_input.append(prev_prediction if prev_prediction is not None else lam_g)
    s.received.append(acc.received)
    s.processed.append(acc.processed)
    s.entry_processed.append(acc.entry)
    s.queued.append(acc.queued)
    s.sink_processed.append(acc.sink)
    s.completed.append(acc.sink / per_input)
    s.latency_sum_s.append(acc.latency_s / per_input)
    s.latency_ms.append(_mean_ms(acc.latency_s, acc.sink))
    s.expired.append(acc.expired)
    s.dropped.append(acc.dropped)
    s.needed.append(acc.needed)
    s.planned.append(planned)
