"""Ingress: LAS shedding at the door, then forwarding to the entry operators.

A batch of raw events is decided at once (hashing and argmin vectorised in the sketch,
the sequential Ĉ/CHECK loop in the shedder). The entry operator's (F, W) come from Redis
whenever a new version appears, and Ĉ advances by ŵ / active replicas (replica-aware
capacity), so shedding starts only when even the current pool cannot hold τ.
Nothing vanishes: each event is admitted, shed (counted, optionally kept on sps.shed) or
dead-lettered.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from services.dataplane.envelope import Envelope
from shared.las.redis_store import SketchSubscriber
from shared.las.shedder import AverageQueuingLatency, LasShedder
from shared.las.sketch import key_to_int
from shared.topology import Topology


@dataclass
class Decision:
    admitted: list[tuple[Envelope, bytes | None]] = field(default_factory=list)
    shed: list[bytes] = field(default_factory=list)
    dead: list[tuple[bytes, str]] = field(default_factory=list)
    unkeyed: int = 0


def key_of(payload: Any, path: list[str]) -> str | None:
    cur = payload
    for part in path:
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            return None
    return None if cur is None or isinstance(cur, dict | list) else str(cur)


class Gate:
    def __init__(
        self, topology: Topology, redis: Any, prefix_keys: Any, tau_ms: float | None, key_field: str
    ) -> None:
        self.topology = topology
        self.entry = topology.entry_operators[0]
        self.path = key_field.split(".")
        self.redis = redis
        self.keys = prefix_keys
        self.shedder: LasShedder | None = None
        if tau_ms is not None:
            self.shedder = LasShedder(
                AverageQueuingLatency(tau_ms / 1000.0), bootstrap_mean=topology[self.entry].et_s
            )
            self.subscriber = SketchSubscriber(redis, self.entry, prefix_keys)
            self.shedder.on_piggyback = self._piggyback
            self.shedder.idle_clamp = False
        self._last_poll = 0.0
        # Δ synchronisation (Listing 3.2 l. 11-13, 24-27) across processes: one Ĉ travels
        # on an event at a time; the entry operator answers Δ = completion − Ĉ through
        # Redis. Waiting for each answer before the next keeps Δs from counting twice.
        self._sync_sent_at: float | None = None
        self._span = 0.05
        self._carry: dict[int, float] = {}

    def refresh(self) -> None:
        """At most twice a second: a new sketch version, Δ replies, the active count."""
        if self.shedder is None or time.monotonic() - self._last_poll < 0.5:
            return
        self._last_poll = time.monotonic()
        if (pair := self.subscriber.poll()) is not None:
            self.shedder.receive_sketch(pair)
        for d in self.subscriber.deltas():
            self._learn_cost(d)
            self.shedder.apply_delta(d)
            self._sync_sent_at = None
        stale = self._sync_sent_at is not None and time.monotonic() - self._sync_sent_at > 30
        if self._sync_sent_at is None or stale:
            from shared.las.shedder import ShedderState

            if self.shedder.state is ShedderState.RUN:
                self.shedder.state = ShedderState.SEND
        active = self.redis.get(self.keys.active(self.entry))
        self.shedder.set_replicas(int(active) if active else 1)

    def _piggyback(self, k: int, c_hat: float) -> None:
        assert self.shedder is not None and self.shedder.t0 is not None
        self._carry[k] = self.shedder.t0 + c_hat
        self._sync_sent_at = time.monotonic()
        self._span = max(0.05, self.shedder.t0 + c_hat - time.time())

    def _learn_cost(self, delta: float) -> None:
        """Beyond the paper: the sketches measure execution time, but in a micro-batch
        engine an event costs more wall-clock time than that. Each Δ says how far the
        estimated wait of one event was off; scale ŵ by that ratio (at most 2× per step),
        so Ĉ advances at the entry operator's real drain rate."""
        assert self.shedder is not None
        ratio = min(2.0, max(0.5, (self._span + delta) / self._span))
        m = (1.0 + self.shedder.correction) * ratio
        self.shedder.correction = min(1000.0, max(1.0, m)) - 1.0

    def decide(self, raws: list[bytes | None], now: float) -> Decision:
        out = Decision()
        parsed: list[tuple[Envelope, str | None]] = []
        for raw in raws:
            try:
                doc = json.loads(raw) if raw is not None else None
                if not isinstance(doc, dict) or "payload" not in doc:
                    raise ValueError("an ingress event is an object with a 'payload'")
                ev = Envelope(
                    str(doc.get("id") or f"i{time.time_ns()}"),
                    float(doc.get("ts", now)),
                    "source",
                    doc["payload"],
                )
            except (ValueError, TypeError, UnicodeDecodeError) as exc:
                out.dead.append((raw or b"", f"ingress: {exc}"))
                continue
            parsed.append((ev, key_of(ev.payload, self.path)))
        if not parsed:
            return out
        if self.shedder is None:
            out.admitted = [(replace(ev, adm=now), k.encode() if k else None) for ev, k in parsed]
            out.unkeyed = sum(1 for _, k in parsed if k is None)
            return out
        keyed = [(i, key_to_int(k)) for i, (_, k) in enumerate(parsed) if k is not None]
        drop = np.zeros(len(parsed), dtype=bool)
        if keyed:
            idx = np.array([i for i, _ in keyed])
            keys = np.array([k for _, k in keyed], dtype=np.int64)
            self._carry.clear()
            drop[idx] = self.shedder.shed_batch(keys, np.full(len(keys), now))
        carry = {int(idx[k]): c for k, c in self._carry.items()} if keyed else {}
        for i, (ev, k) in enumerate(parsed):
            if drop[i]:
                out.shed.append(ev.encode())
            else:
                out.admitted.append(
                    (replace(ev, adm=now, lasc=carry.get(i)), k.encode() if k else None)
                )
                out.unkeyed += k is None
        return out
