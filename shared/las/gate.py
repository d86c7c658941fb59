"""LAS admission at the door (the ingress service's, or the entry operator's first step
with ``admission: entry``).

A batch of raw events is decided at once (hashing and argmin vectorised in the sketch,
the sequential Ĉ/CHECK loop in the shedder). The entry operator's (F, W) come from Redis
whenever a new version appears, and Ĉ advances by ŵ / active replicas (replica-aware
capacity), so shedding starts only when even the current pool cannot hold τ; with a
latency goal, only when the plan says even the largest pool cannot (scaling first). The
shedder's estimates are calibrated to the engine's wall clock by probes the entry operator
answers (elastic_sps.las.wallclock: the micro-batch floor and a multiplier on ŵ).
Nothing vanishes: each event is admitted, shed (counted, optionally kept on sps.shed) or
dead-lettered.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from elastic_sps.io.envelope import Envelope
from elastic_sps.io.knowledge_base import KnowledgeBase
from elastic_sps.las.redis_store import SketchSubscriber
from elastic_sps.las.shedder import HorizonAverageQueuingLatency, LasShedder
from elastic_sps.las.sketch import key_to_int
from elastic_sps.las.wallclock import CalibratedShedder
from elastic_sps.model.admission import admissible
from elastic_sps.model.engine import LIVE_ENGINE
from elastic_sps.model.records import BadRecord, SourceSpec
from elastic_sps.model.topology import Topology


@dataclass
class Decision:
    admitted: list[tuple[Envelope, bytes | None]] = field(default_factory=list)
    shed: list[bytes] = field(default_factory=list)
    unkeyed: int = 0


ReadAt = tuple[str, int, float]  # topic, partition, event time


def events_of(
    spec: SourceSpec, msgs: list[Any], now: float
) -> tuple[
    list[tuple[Envelope, str | None]], list[tuple[bytes, str]], list[tuple[str, int, float]]
]:
    """The consumed records as events with their LAS keys, the undecodable ones with the
    reason (``elastic_sps.model.records``), and where each event was read with its event time
    (its partition's watermark)."""
    events, dead, times = [], [], []
    for m in msgs:
        raw = m.value()
        try:
            _, stamp = m.timestamp()
            ev, key = spec.event(raw, m.topic(), m.partition(), m.offset(), stamp, now)
        except BadRecord as exc:
            dead.append((raw or b"", f"ingress: {exc}"))
            continue
        events.append((ev, key))
        times.append((m.topic(), m.partition(), ev.event_time))
    return events, dead, times


class Gate:
    def __init__(
        self,
        topology: Topology,
        redis: Any,
        prefix_keys: Any,
        tau_ms: float | None,
        horizon_s: float = 30.0,
        scale_first: bool = False,
        goal_s: float | None = None,
        td: float = 1.0,
        batch_s: float = 1.0,
        local: Callable[[int], int] | None = None,
        deltas_key: str | None = None,
    ) -> None:
        """``scale_first``: shed only while the last plan is short (``Keys.plan_short``:
        an operator's need beyond its pool or budget); otherwise admit everything, still
        charged to LAS's estimate. ``goal_s`` (with ``scale_first``): while the plan is
        short, also admit at most what keeps the short operators' queues clearable
        within the goal, per interval of ``td`` (``sim_shedding.admissible``, the
        simulator's ``goal`` shedder): LAS bounds the entry operator's queuing only,
        so with a downstream operator short, end-to-end latency would reach several
        times the goal while the entry's queuing stayed near it. ``batch_s``: the
        dataplane's checkpoint interval (``SPS_CHECKPOINT_S``): how long an event's
        progress waits to be recorded. ``local``: of the entry operator's active
        replicas, how many serve the events this gate sees (an entry step's gate sees
        its worker's share); ``deltas_key``: where its probes' Δ replies come (the
        operator's list unless said).

        The queues may hold only what is cleared within the goal less the time an event
        spends beside them (``path_s``): the path's et and per-hop engine time
        (``LIVE_ENGINE.hop_s``, measured at 50 % load) plus one checkpoint interval,
        since the queue is read from offsets that move only at a checkpoint. Bounded at
        the whole goal, admitted events would wait about the goal at the short operator
        and the path on top."""
        self.topology = topology
        self.entry = topology.entry_operators[0]
        self.redis = redis
        self.keys = prefix_keys
        self.kb = KnowledgeBase(redis, prefix_keys)
        self.las: CalibratedShedder | None = None
        self.scale_first = scale_first
        if tau_ms is not None:
            shedder = LasShedder(
                HorizonAverageQueuingLatency(tau_ms / 1000.0, horizon_s),
                bootstrap_mean=topology[self.entry].et_s,
            )
            self.las = CalibratedShedder(shedder)
            self.subscriber = SketchSubscriber(redis, self.entry, prefix_keys, deltas_key)
        self._last_poll = 0.0
        self.goal_s, self.td, self.batch_s = goal_s, td, batch_s
        self.path_s = topology.path_seconds(LIVE_ENGINE.hop_s) + batch_s
        self.budget_interval = -1
        self.budget = float("inf")  # input events this interval may still admit
        self.local = local or (lambda active: active)

    @classmethod
    def configured(
        cls,
        topology: Topology,
        redis: Any,
        prefix_keys: Any,
        settings: Any,
        local: Callable[[int], int] | None = None,
        deltas_key: str | None = None,
    ) -> Gate:
        """The gate the admission settings (``AdmissionSettings``) describe. One goal:
        SPS_LATENCY_GOAL_MS is LAS's τ unless SPS_TAU_MS says otherwise, and with a goal
        LAS sheds only while the plan is short (scaling before shedding)."""
        goal = settings.latency_goal_ms
        return cls(
            topology,
            redis,
            prefix_keys,
            settings.tau_ms if settings.tau_ms is not None else goal,
            settings.las_horizon_s,
            scale_first=goal is not None,
            goal_s=goal / 1000.0 if goal is not None else None,
            td=settings.td,
            batch_s=settings.checkpoint_s,
            local=local,
            deltas_key=deltas_key,
        )

    def refresh(self, force: bool = False) -> None:
        """A new sketch version, Δ replies and the active count (polled ~10 times a
        second: three small Redis reads, never per event; ``force``: now)."""
        if self.las is None or (not force and time.monotonic() - self._last_poll < 0.1):
            return
        self._last_poll = time.monotonic()
        shedder = self.las.shedder
        if (pair := self.subscriber.poll()) is not None:
            assert isinstance(shedder, LasShedder)
            shedder.receive_sketch(pair)
        for tag, delta in self.subscriber.deltas():
            self.las.answer(tag, delta)
        if self.scale_first:
            short = (self.redis.get(self.keys.plan_short) or b"").decode()
            self.las.held = not short
            self._budget(short)
        self.las.sync()
        shedder.set_replicas(self.local(self.kb.active(self.topology[self.entry])))

    def _budget(self, short: str) -> None:
        """At each interval's first refresh: the admission bound of the interval, from
        the replicas and queues of the operators scaling cannot help: those the last plan
        was short for, and those already at their full pool (no goal: unbounded). The
        plan's short flag alone flipped with the micro-batches' jumping queues (short in
        41-45 intervals of a run, 1.9-2.5 x the goal end to end): an operator at its
        pool whose queue it cannot clear within the goal is short whatever the last
        plan said, and one that can clear it bounds nothing."""
        k = int(time.time() // self.td)
        if k == self.budget_interval:
            return
        self.budget_interval = k
        if self.goal_s is None:
            self.budget = float("inf")
            return
        ops = self.topology.operators
        active = self.kb.actives(ops)
        names = {n for n in short.split(",") if n in self.topology.names}
        names |= {op.name for op in ops if active[op.name] >= op.max_replicas}
        queued = {n: self._queued(n, active[n]) for n in names}
        bound = admissible(
            self.topology,
            active,
            queued,
            self.goal_s,
            self.td,
            LIVE_ENGINE.efficiency,
            names,
            self.path_s,
        )
        # a gate that sees its replicas' share of the input admits that share of it
        entry = max(1, active[self.entry])
        self.budget = bound * min(1.0, self.local(entry) / entry)

    def _queued(self, name: str, active: int) -> float:
        """The operator's queue, net of what its running batch has already processed: the
        committed offsets move only when a batch ends, so the recorded backlog counts, on
        average, half a batch of processed events (the bound would shed them too)."""
        op = self.topology[name]
        backlog = float(sum(self.kb.backlog(name, op.max_replicas)))
        served = LIVE_ENGINE.efficiency * active / op.et_s * self.batch_s / 2
        return max(0.0, backlog - served)

    def las_state(self, now: float) -> dict[str, float]:
        """What the shedder believes now: floor, multiplier and the estimated wait q̂."""
        assert self.las is not None
        cal = self.las.calibration
        return {
            "floor": cal.floor,
            "multiplier": cal.multiplier,
            "wait": self.las.estimated_wait(now),
            "in_flight": float(len(cal.in_flight)),
            "infeasible": float(self.las.infeasible),
        }

    def decide(self, parsed: list[tuple[Envelope, str | None]], now: float) -> Decision:
        """Admit or shed each event (with its LAS key; None: unkeyed, always admitted)."""
        out = Decision()
        for (ev, k), admitted in zip(parsed, self.admit(parsed, now), strict=True):
            if admitted is None:
                out.shed.append(ev.encode())
            else:
                out.admitted.append((admitted, k.encode() if k else None))
                out.unkeyed += k is None
        return out

    def admit(self, parsed: list[tuple[Envelope, str | None]], now: float) -> list[Envelope | None]:
        """Each event as admitted (its admission time, a LAS probe's predicted end), or
        None where it is shed, in order."""
        if not parsed:
            return []
        if self.las is None:
            return [ev.admitted(now) for ev, _ in parsed]
        keyed = [(i, key_to_int(k)) for i, (_, k) in enumerate(parsed) if k is not None]
        drop = np.zeros(len(parsed), dtype=bool)
        carry: dict[int, float] = {}
        if keyed:
            idx = np.array([i for i, _ in keyed])
            keys = np.array([k for _, k in keyed], dtype=np.int64)
            drop[idx], probes = self.las.decide(keys, now, [parsed[i][0].id for i in idx])
            carry = {int(idx[j]): now + predicted for j, predicted in probes.items()}
        for i in np.flatnonzero(~drop).tolist():  # within the bound, in arrival order
            if self.budget >= 1:
                self.budget -= 1
            else:
                drop[i] = True
        return [
            None if drop[i] else ev.admitted(now, carry.get(i)) for i, (ev, _) in enumerate(parsed)
        ]
