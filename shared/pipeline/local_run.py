"""A topology's operators run in this process over a list of payloads, no servers: for a
user's tests (as Bytewax's ``run_main`` with testing sources and sinks) and ``elastic-sps
run-local`` / ``check``.

Each payload enters at the source and goes through the DAG before the next one, each
operator getting a real ``Context``: keyed operators their key's ``ctx.state`` and
window operators their windows, kept in memory (``local_store``), closing as the
watermark passes them and all at the end of the input (a bounded source's last
watermark, as Flink's). An operator that raises dead-letters the event with the
exception's reason (``on_error: fail``: the run stops with it), as the dataplane does.
Event time is the source's ``time`` field; without one every event has the run's start.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.model import topology as topology_model
from shared.model.keyed import key_group
from shared.model.records import BadRecord
from shared.model.topology import Topology
from shared.pipeline.chain import open_runnable
from shared.pipeline.failures import OperatorFailing, describe
from shared.pipeline.local_store import MemoryStore
from shared.pipeline.operators import Context, DiscardedWrites, Output, Runnable, normalise
from shared.pipeline.samples import record_bytes
from shared.pipeline.stateful import (
    Count,
    KeyState,
    Late,
    WindowAggregator,
    event_key,
    open_aggregate,
)


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
    per-key ``ctx.state`` at the end; ``received``: events in, per operator."""

    outputs: dict[str, list[Any]] = field(default_factory=dict)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    late: list[tuple[str, str]] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)
    state: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: int = 0
    received: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class _Event:
    id: str
    payload: Any
    evt: float
    input: str  # the operator it came from ("source")


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
    runner = _Runner(topo.declared, connect_redis(redis), prefix)
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
        from shared.io.redis_client import redis_client

        return redis_client(redis)
    return redis


class _Runner:
    def __init__(self, topo: Topology, redis: Any, prefix: str) -> None:
        self.topo, self.redis = topo, redis
        self.now = time.time()
        self.result = LocalRun()
        self.queue: deque[tuple[str, _Event]] = deque()
        self.ctx: dict[str, Context] = {}
        self.code: dict[str, Runnable] = {}
        self.windows: dict[str, WindowAggregator] = {}
        self.stores = {op.name: MemoryStore() for op in topo.operators if op.stateful}
        for name in topo.order:
            op = topo[name]
            writes = redis.pipeline(transaction=False) if redis is not None else DiscardedWrites()
            self.ctx[name] = ctx = Context(name, redis, prefix, writes)
            if op.window is not None:
                agg = open_aggregate(op.code, name) if op.code else Count()
                self.windows[name] = WindowAggregator(op, agg, idle_s=math.inf)
            else:
                self.code[name] = open_runnable(topo, name, ctx)

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
        ev = _Event(event_id, env.payload, env.event_time, "source")
        for e in self.topo.successors["source"]:
            self.queue.append((e.dst, ev))
        self._drain()

    def finish(self) -> None:
        """The end of the input: every window closes, in topological order."""
        for name in self.topo.order:
            if name in self.windows:
                store = self.stores[name]
                store.inputs = {i: (math.inf, self.now) for i in store.inputs}
                self._fire(name)
                self._drain()

    def close(self) -> None:
        for inst in self.code.values():
            inst.close()
        self.result.state = {n: s.state() for n, s in self.stores.items() if n not in self.windows}

    def _drain(self) -> None:
        while self.queue:
            name, ev = self.queue.popleft()
            self._deliver(name, ev)

    def _deliver(self, name: str, ev: _Event) -> None:
        op, ctx = self.topo[name], self.ctx[name]
        ctx.event_id = ev.id
        self.result.received[name] = self.result.received.get(name, 0) + 1
        try:
            result = self._process(name, ev, ctx)
            if ctx.writes is not None and len(ctx.writes):
                ctx.writes.execute()
        except Late:
            self.result.late.append((name, ev.id))
            return
        except Exception as exc:  # the user's code (or its return value) raised
            failure = describe(exc)
            if op.on_error == "fail":
                raise OperatorFailing(
                    f"operator {name!r} raised {failure.reason} (on_error: fail)"
                ) from exc
            letter = DeadLetter(name, ev.id, failure.reason, ev.payload, failure.frames)
            self.result.dead_letters.append(letter)
            return
        self._route(name, ev, result)
        if name in self.windows:
            self._fire(name)

    def _process(self, name: str, ev: _Event, ctx: Context) -> Output:
        op = self.topo[name]
        if name in self.windows:
            self.windows[name].add(self.stores[name], ev.payload, ev.evt, ev.input, self.now)
            return []
        if op.key:
            ctx.key = event_key(op, ev.payload)
            group = key_group(ctx.key, op.key_groups)
            ctx.state = KeyState(self.stores[name], group, ctx.key)
        successors = tuple(e.dst for e in self.topo.successors[name])
        return normalise(self.code[name].process(ev.payload, ctx), name, successors)

    def _fire(self, name: str) -> None:
        for res in self.windows[name].fire(self.stores[name], self.now):
            window = _Event(res.id, res.payload, float(res.end), name)
            self._route(name, window, [(None, res.payload)])

    def _route(self, name: str, ev: _Event, result: Output) -> None:
        successors = [e.dst for e in self.topo.successors[name]]
        for dst, payload in result:
            out = _Event(ev.id, payload, ev.evt, name)
            if not successors:
                self._emit(name, payload)
            for target in [dst] if dst is not None else successors:
                self.queue.append((target, out))

    def _emit(self, sink: str, payload: Any) -> None:
        topic = self.topo[sink].output
        if topic:
            self.result.outputs.setdefault(topic, []).append(payload)
        else:
            self.result.dropped[sink] = self.result.dropped.get(sink, 0) + 1
