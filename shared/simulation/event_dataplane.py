"""The simulator's event-level data plane (issue: faithful evaluation): every event.

Beside the fluid mode (cohorts, fast), this one follows each event: λ_G(t) events arrive
at random times within interval t; an operator routes each arriving event to one of its
active replicas at random (Storm's shuffle grouping) and every replica serves its own FIFO
queue, one event at a time, for et drawn with the engine's squared coefficient of
variation (a gamma distribution; deterministic at 0). So the wait below saturation is
simulated, not approximated (the fluid mode uses Sakasegawa's G/G/c formula), and it is
the wait of per-replica queues, longer than a shared queue's at the same load.

PA-SPS's limits apply as in the fluid mode: an event older than ``t_out`` when its service
would start expires without using its replica; an event that finds the operator's queues
holding ``q_size`` events is dropped. A completed event goes to each successor
``fraction`` times on average (the integer part always, the rest with that probability),
after the engine's ``hop_s``. On a scale-in, the queues of the replicas taken away are
re-routed to those that stay: nothing is lost.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping

import numpy as np

from elastic_sps.model import pa_sps_model as model
from elastic_sps.model.engine import EngineModel, Handover, Limits
from elastic_sps.model.interval_stats import OperatorStats
from elastic_sps.model.topology import SOURCE, Operator, Topology
from elastic_sps.simulation.sim_series import IntervalTally

Event = tuple[float, float]  # (born: entered the system, ready: reached this operator)


class _Durations:
    """Execution times for one operator: et × a gamma variate of mean 1 and the given
    squared coefficient of variation, drawn in blocks (one numpy call per block)."""

    def __init__(self, et_s: float, cv2: float, rng: np.random.Generator) -> None:
        self.et, self.cv2, self.rng = et_s, cv2, rng
        self.block: list[float] = []

    def next(self) -> float:
        if self.cv2 <= 0:
            return self.et
        if not self.block:
            shape = 1.0 / self.cv2
            self.block = (self.rng.gamma(shape, self.et / shape, size=4096)).tolist()
        return self.block.pop()


class _Operator:
    """One operator's replicas: a FIFO queue and a busy-until clock each."""

    def __init__(self, op: Operator, engine: EngineModel, rng: np.random.Generator) -> None:
        self.op = op
        self.queues: list[deque[Event]] = []
        self.free_at: list[float] = []
        self.inbox: list[tuple[str, Event]] = []  # sent here, not yet ready
        self.durations = _Durations(op.et_s, engine.et_cv2, rng)

    @property
    def queued(self) -> int:
        return sum(len(q) for q in self.queues) + len(self.inbox)

    def resize(self, r: int, t0: float, rng: np.random.Generator) -> None:
        """New replicas start idle at t0; the queues of removed ones are re-routed."""
        while len(self.queues) < r:
            self.queues.append(deque())
            self.free_at.append(t0)
        if len(self.queues) > r:
            orphans = [e for q in self.queues[r:] for e in q]
            del self.queues[r:], self.free_at[r:]
            for e, k in zip(orphans, rng.integers(0, r, size=len(orphans)).tolist(), strict=True):
                self.queues[k].append(e)
            for q in self.queues:  # keep each queue in ready order after the merge
                if len(q) > 1:
                    q2 = sorted(q, key=lambda ev: ev[1])
                    q.clear()
                    q.extend(q2)


class EventDataplane:
    """Every event through ``topo``; see the module docstring."""

    def __init__(self, topo: Topology, engine: EngineModel, limits: Limits, seed: int = 0) -> None:
        self.topo, self.engine, self.limits = topo, engine, limits
        self.rng = np.random.default_rng(seed)
        self.ops = {n: _Operator(topo[n], engine, self.rng) for n in topo.order}
        self.entry, self.sinks = set(topo.entry_operators), set(topo.sinks)
        self.carry = 0.0  # the fractional events of λ_G not yet emitted
        self.handled = 0
        self.td = 1.0

    def queued(self) -> float:
        return float(sum(o.queued for o in self.ops.values()))

    def queued_by_operator(self) -> dict[str, float]:
        return {n: float(o.queued) for n, o in self.ops.items()}

    def _source(self, t0: float, td: float, lam_g: float) -> list[Event]:
        n = math.floor(lam_g + self.carry + 1e-9)
        self.carry = lam_g + self.carry - n
        times = np.sort(self.rng.uniform(t0, t0 + td, size=n)).tolist()
        return [(a, a) for a in times]

    def _send(self, src: str, events: list[Event]) -> None:
        """A completed event to each successor, ``fraction`` times on average."""
        for e in self.topo.successors[src]:
            whole, part = int(e.fraction), e.fraction - int(e.fraction)
            copies = [ev for ev in events for _ in range(whole)]
            if part > 1e-12 and events:
                keep = (self.rng.random(len(events)) < part).tolist()
                copies += [ev for ev, k in zip(events, keep, strict=True) if k]
            self.ops[e.dst].inbox.extend((src, ev) for ev in copies)

    def step(
        self,
        t0: float,
        td: float,
        lam_g: float,
        active: Mapping[str, int],
        acc: IntervalTally,
        handover: Handover | None = None,
    ) -> None:
        """One interval, at the counts that hold most of it (an event is served by one
        whole replica)."""
        if handover is not None:
            active = handover.holding(active)
        self.td = td
        self._send(SOURCE, self._source(t0, td, lam_g))
        for name in self.topo.order:
            done = self._serve(self.ops[name], active[name], t0, t0 + td, acc)
            if name in self.entry:
                acc.entry += len(done)
            if name in self.sinks:
                acc.sink += len(done)
                acc.latency_s += sum(ready - born for born, ready in done)
            self._send(name, done)

    def _route(self, o: _Operator, t1: float, acc: IntervalTally) -> dict[str, float]:
        """Hand what became ready before t1 to random replicas; a full operator drops."""
        ready = sorted((x for x in o.inbox if x[1][1] < t1), key=lambda x: x[1][1])
        o.inbox = [x for x in o.inbox if x[1][1] >= t1]
        received: dict[str, float] = {p.src: 0.0 for p in self.topo.predecessors[o.op.name]}
        dropped = 0
        q_size = self.limits.q_size
        size = sum(len(q) for q in o.queues)
        picks = self.rng.integers(0, len(o.queues), size=len(ready)).tolist()
        for (src, ev), k in zip(ready, picks, strict=True):
            received[src] += 1
            if q_size is not None and size >= q_size:
                dropped += 1
                continue
            o.queues[k].append(ev)
            size += 1
        acc.dropped += dropped
        self.handled += dropped
        return received

    def _serve(self, o: _Operator, r: int, t0: float, t1: float, acc: IntervalTally) -> list[Event]:
        """One interval of one operator; returns (born, ready at the successors) of the
        events it completed."""
        before = sum(len(q) for q in o.queues)
        o.resize(r, t0, self.rng)
        dropped_before = acc.dropped
        received = self._route(o, t1, acc)
        t_out, hop = self.limits.t_out_s, self.engine.hop_s
        done: list[Event] = []
        expired, busy = 0, 0.0
        for k, q in enumerate(o.queues):
            free = o.free_at[k]
            while q:
                born, ready = q[0]
                start = free if free > ready else ready
                if start >= t1:
                    break
                q.popleft()
                if t_out is not None and start - born > t_out:
                    expired += 1
                    continue
                service = o.durations.next()
                free = start + service
                busy += service
                done.append((born, free + hop))
            o.free_at[k] = free
        self.handled += len(done) + expired
        self._account(
            o, r, before, received, done, expired, busy, acc, acc.dropped - dropped_before
        )
        return done

    def _account(
        self,
        o: _Operator,
        r: int,
        before: int,
        received: dict[str, float],
        done: list[Event],
        expired: int,
        busy: float,
        acc: IntervalTally,
        dropped: float,
    ) -> None:
        recv = sum(received.values())
        op = o.op
        acc.needed += model.round_replicas(
            model.replicas_needed(before + recv, op.et_s, self.td),
            op.min_replicas,
            op.max_replicas,
        )
        fan_out = sum(e.fraction for e in self.topo.successors[op.name])
        queued = o.queued
        acc.ops[op.name] = OperatorStats(
            received=recv,
            processed=len(done),
            queued=queued,
            received_from=received,
            emitted=len(done) * fan_out,
            active_replicas=r,
            et_s=op.et_s,
            busy_s=busy,
            expired=expired + dropped,
        )
        acc.received += recv
        acc.processed += len(done)
        acc.queued += queued
        acc.expired += expired
