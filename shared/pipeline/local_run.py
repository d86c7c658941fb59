"""A topology's operators run in this process over a list of payloads, no servers: for a
user's tests (as Bytewax's ``run_main`` with testing sources and sinks) and ``elastic-sps
run-local`` / ``check``.

Each payload enters at the source and goes through the DAG before the next one, each
operator run by the dataplane's own per-event core (``engine``) on a partition kept in
memory (``local_store``): keyed operators get their key's ``ctx.state``, window operators
their windows. The source declares its watermark (the latest event time read) after each
payload and, at the end of the input, +inf (a bounded source's last watermark, as
Flink's), so every window closes; declarations flow down the DAG as they do live. An
operator that raises dead-letters the event with the exception's reason (``on_error:
fail``: the run stops with it), as the dataplane does. Event time is the source's
``time`` field; without one every event has the run's start.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elastic_sps.io.watermarks import Declaration, Valve
from elastic_sps.model import topology as topology_model
from elastic_sps.model.records import BadRecord
from elastic_sps.model.topology import Topology
from elastic_sps.pipeline.chain import MemberFailed, open_runnable
from elastic_sps.pipeline.engine import Emitted, Event, OperatorCore
from elastic_sps.pipeline.failures import OperatorFailing, describe
from elastic_sps.pipeline.local_store import MemoryStore
from elastic_sps.pipeline.operators import Context, DiscardedWrites
from elastic_sps.pipeline.samples import record_bytes
from elastic_sps.pipeline.stateful import Late, key_or_none


@dataclass(frozen=True)
class DeadLetter:
    operator: str  # "source": the payload had no id or time where the source says
    event_id: str
    reason: str  # "TypeName: message", as the dead-letter topic carries it
    payload: Any
    frames: str = ""  # the exception's last frames, innermost last


@dataclass
class LocalRun:
    """What a run produced: ``outputs`` per sink topic, in order; ``dropped``: per sink
    without ``output:``, how many payloads it emitted to nowhere; ``late``: (operator,
    event id) of events whose windows had closed; ``state``: each keyed operator's
    per-key ``ctx.state`` at the end; ``received``: events in, per operator;
    ``repeats``: per keyed or window operator, events it had applied already (same id);
    ``expired_state``: per operator with ``state_ttl_s``, keys whose state expired;
    ``rekeyed``: (operator, event id, its chain head's key, its own) for each event a
    keyed chain member got with another key than its head's (chained, it fails:
    ``KeyChanged``)."""

    outputs: dict[str, list[Any]] = field(default_factory=dict)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    late: list[tuple[str, str]] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)
    state: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: int = 0
    received: dict[str, int] = field(default_factory=dict)
    repeats: dict[str, int] = field(default_factory=dict)
    expired_state: dict[str, int] = field(default_factory=dict)
    rekeyed: list[tuple[str, str, str, str]] = field(default_factory=list)


def run_local(
    topology: str | Path | Topology,
    payloads: Iterable[Any],
    *,
    redis: Any = None,
    prefix: str = "local",
) -> LocalRun:
    """Run ``topology`` (a built-in name, a YAML path or a loaded one) over ``payloads``.
    ``redis``: a client or URL for operators that use ``ctx.redis`` (None: they get None)."""
    topo = topology if isinstance(topology, Topology) else topology_model.load(topology)
    runner = _Runner(topo.declared, connect_redis(redis), prefix, keyed_chains(topo))
    try:
        for k, payload in enumerate(payloads):
            runner.feed(k, payload)
        runner.finish()
    finally:
        runner.close()
    return runner.result


def connect_redis(redis: Any) -> Any:
    """A client for ``redis``: a URL connects, a client (or None) is kept."""
    if isinstance(redis, str):
        from elastic_sps.io.redis_client import redis_client

        return redis_client(redis)
    return redis


def keyed_chains(topo: Topology) -> dict[str, str]:
    """Each member of a chain holding a keyed member after its head (as ``topo`` chains
    when loaded) -> the chain's head."""
    return {
        m.name: op.members[0].name for op in topo.operators if op.keyed_members for m in op.members
    }


class _Runner:
    """Operators run as declared; ``chains`` (``keyed_chains``) lets it note what a keyed
    chain would refuse: a member's event whose key is not its head's."""

    def __init__(
        self, topo: Topology, redis: Any, prefix: str, chains: dict[str, str] | None = None
    ) -> None:
        self.topo, self.redis = topo, redis
        self.chains = chains or {}
        self.now = time.time()
        self.result = LocalRun()
        # (operator, event, the key of the event its keyed chain's head got, if any)
        self.queue: deque[tuple[str, Event, str | None]] = deque()
        self.ctx: dict[str, Context] = {}
        self.cores: dict[str, OperatorCore] = {}
        self.stores = {name: MemoryStore() for name in topo.order}
        self.valves: dict[str, Valve] = {}
        self.declared: dict[str, Declaration] = {}
        self.source_wm: float | None = None
        self.ending = False
        for name in topo.order:
            writes = redis.pipeline(transaction=False) if redis is not None else DiscardedWrites()
            self.ctx[name] = ctx = Context(name, redis, prefix, writes)
            core = OperatorCore(topo, name, open_runnable(topo, name, ctx))
            self.cores[name] = core
            # one partition per operator, one reader of one source partition
            core.senders = {k: 1 for k in core.senders}
            self.valves[name] = core.valve(self.stores[name])

    def feed(self, k: int, payload: Any) -> None:
        """One payload as the ingress reads its record (``SourceSpec.event``): its id and
        event time from the source's fields; without an id field, ``local/<k>``."""
        src = self.topo.source
        self.result.events += 1
        try:
            env, _ = src.event(record_bytes(payload, src.format), "local", 0, k, None, self.now)
        except BadRecord as exc:
            self.result.dead_letters.append(DeadLetter("source", f"local/{k}", str(exc), payload))
            return
        event_id = env.id if src.id != "offset" else f"local/{k}"
        ev = Event(event_id, env.payload, env.event_time)
        for e in self.topo.successors["source"]:
            self.queue.append((e.dst, ev, None))
        self._drain()
        if self.source_wm is None or ev.evt > self.source_wm:
            self.source_wm = ev.evt
            self._from_source(Declaration("source", 0, 1, ev.evt))

    def finish(self) -> None:
        """The end of the input: the source's last watermark closes every window (and
        expires no state: what is left is the run's ``state``)."""
        self.ending = True
        self._from_source(Declaration("source", 0, 1, math.inf, idle=True))

    def _from_source(self, d: Declaration) -> None:
        for e in self.topo.successors["source"]:
            self._declare(e.dst, d)

    def _declare(self, name: str, d: Declaration) -> None:
        """A declaration into ``name``: the windows it closes go on first, then the
        operator's own declaration, if it changed, to its successors."""
        core, valve = self.cores[name], self.valves[name]
        fired = core.declare(valve, d, self.stores[name])
        if not self.ending:  # +inf ends the input: windows close, state is kept
            gone = core.expire(valve, self.stores[name])
            if gone:
                self.result.expired_state[name] = self.result.expired_state.get(name, 0) + gone
        for res in fired:
            window = Event(res.id, res.payload, res.event_time, name)
            failed: list[MemberFailed] = []
            out = core.fired(res, self.ctx[name], failed)
            self._failed(name, failed)
            self._route(name, out, window, None)
            self._drain()
        mine = core.declaration(0, valve, self.stores[name])
        if mine != self.declared.get(name):
            self.declared[name] = mine
            for s in core.successors:
                self._declare(s, mine)

    def close(self) -> None:
        for core in self.cores.values():
            core.impl.close()
        self.result.state = {
            n: self.stores[n].state() for n, c in self.cores.items() if c.op.key and not c.window
        }

    def _drain(self) -> None:
        while self.queue:
            name, ev, head_key = self.queue.popleft()
            self._deliver(name, ev, head_key)

    def _deliver(self, name: str, ev: Event, head_key: str | None) -> None:
        core, ctx, store = self.cores[name], self.ctx[name], self.stores[name]
        self.result.received[name] = self.result.received.get(name, 0) + 1
        if head_key is not None and core.op.key:  # a keyed member after the head
            key = key_or_none(core.op, ev.payload)
            if key is not None and key != head_key:
                self.result.rekeyed.append((name, ev.id, head_key, key))
        if core.repeat(ev, store):
            self.result.repeats[name] = self.result.repeats.get(name, 0) + 1
            return
        failed: list[MemberFailed] = []
        try:
            out = core.apply(ev, ctx, store, failed)
            if ctx.writes is not None and len(ctx.writes):
                ctx.writes.execute()
        except Late:
            self.result.late.append((name, ev.id))
            return
        except Exception as exc:  # the user's code (or its return value) raised
            self._dead_letter(name, ev.id, ev.payload, exc)
            return
        self._failed(name, failed)
        if self.chains.get(name) == name:  # a keyed chain's head: its key goes along
            head_key = ctx.key
        self._route(name, out, ev, head_key)

    def _failed(self, name: str, failed: list[MemberFailed]) -> None:
        """A chain's members' failures, each its own input's dead letter."""
        for f in failed:
            self._dead_letter(name, f.event_id, f.payload, f.error)

    def _dead_letter(self, name: str, event_id: str, payload: Any, exc: Exception) -> None:
        failure = describe(exc)
        if self.topo[name].on_error == "fail":
            raise OperatorFailing(
                f"operator {name!r} raised {failure.reason} (on_error: fail)"
            ) from exc
        letter = DeadLetter(name, event_id, failure.reason, payload, failure.frames)
        self.result.dead_letters.append(letter)

    def _route(self, name: str, out: list[Emitted], ev: Event, head_key: str | None) -> None:
        successors = self.cores[name].successors
        chain = self.chains.get(name)
        for dst, out_id, payload in out:
            if not successors or self.topo[name].output:
                self._emit(name, payload)
            for target in [dst] if dst is not None else successors:
                along = head_key if chain is not None and self.chains.get(target) == chain else None
                self.queue.append((target, Event(out_id, payload, ev.evt, name), along))

    def _emit(self, sink: str, payload: Any) -> None:
        topic = self.topo[sink].output
        if topic:
            self.result.outputs.setdefault(topic, []).append(payload)
        else:
            self.result.dropped[sink] = self.result.dropped.get(sink, 0) + 1
