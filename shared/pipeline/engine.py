"""The per-event engine, written once: what one operator does with an event or a
watermark declaration on one partition, behind small ports (a ``Store`` for keyed state,
windows, the ids applied and the watermarks; the caller emits what it returns).

The Spark dataplane (``elastic_sps.services.dataplane.steps``), the in-process runner
(``local_run``) and ``check`` drive this core; in-memory ports make it testable without
servers (``tests/unit/test_engine.py``), as bytewax's ``testing`` and arroyo's strategies
are. Its promises:

* an event's outputs carry distinct deterministic ids: the first its own, the k-th
  ``<id>/<operator>.<k>`` (``operators.with_ids``), so dropping repeats by id never
  drops a distinct output;
* a keyed or window partition applies an event once: an id it applied (from the same
  sender) is skipped, at whatever offset the repeat arrives (retry, zombie, a replay);
* an operator that raises leaves no state write behind (its ``ctx.state`` changes are
  saved only when it returns; a window's accumulators all or none); in a chain, a member
  after the head that raises fails only its own input (``chain.MemberFailed``), as it
  would unchained;
* windows fire when the partition's watermark, combined from its inputs' declarations
  (``elastic_sps.io.watermarks``), reaches their end plus lateness, at that declaration's
  place in the partition's log: a retry reading the same log fires the same windows with
  the same values, whatever the wall clock says.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from elastic_sps.io.watermarks import Declaration, Valve
from elastic_sps.model.keyed import key_group
from elastic_sps.model.topology import Topology
from elastic_sps.pipeline.chain import ChainedOperator, MemberFailed
from elastic_sps.pipeline.key_state import KeyState
from elastic_sps.pipeline.operators import Context, Emitted, Runnable, numbered
from elastic_sps.pipeline.stateful import (
    AggregateOperator,
    MemberStates,
    Store,
    WindowAggregator,
    WindowResult,
    event_key,
    max_timestamp,
)


@dataclass(slots=True)  # not frozen: built per event (``envelope.Envelope`` says why)
class Event:
    id: str
    payload: Any
    evt: float  # its event time
    src: str = "source"  # the operator that sent it
    key: str | None = None  # its key, when the caller extracted it already (prefetch)

    @property
    def once_key(self) -> str:
        """What a repeat shares with the first delivery: the sender and the id (two
        paths of a diamond may carry one id into one operator; they are not repeats)."""
        return f"{self.src}>{self.id}"


def senders(topo: Topology, name: str, learnt: Iterable[str] = ()) -> dict[str, int | None]:
    """Who sends to ``name``'s partitions: each predecessor's pool (the source's
    partition count, and that of an operator in ``learnt``, an entry operator reading
    the source's partitions itself, are learnt from their declarations)."""
    out: dict[str, int | None] = {}
    unknown = {"source", *learnt}
    for e in topo.predecessors[name]:
        out[e.src] = None if e.src in unknown else int(topo[e.src].max_replicas)
    return out


class OperatorCore:
    """One operator's per-event step and its watermark handling."""

    def __init__(
        self,
        topo: Topology,
        name: str,
        impl: Runnable,
        partitions: int | None = None,
        learnt: Iterable[str] = (),
    ) -> None:
        """``partitions``: the operator's input partitions, when not its pool (an entry
        operator reading the source's); ``learnt``: predecessors whose partition count
        their declarations say (``senders``)."""
        self.topo, self.name, self.op = topo, name, topo[name]
        self.partitions = partitions or int(self.op.max_replicas)
        self.impl = impl
        self.successors = tuple(e.dst for e in topo.successors[name])
        self.window: WindowAggregator | None = None
        self.chained = isinstance(impl, ChainedOperator)
        self.keyed_chain = isinstance(impl, ChainedOperator) and impl.keyed_members
        if self.op.window is not None:  # a window heads its chain, if any
            head = impl.head if isinstance(impl, ChainedOperator) else impl
            assert isinstance(head, AggregateOperator)
            self.window = WindowAggregator(self.op, head.aggregate)
        self.senders = senders(topo, name, learnt)

    @property
    def stateful(self) -> bool:
        return bool(self.op.stateful)

    def repeat(self, ev: Event, store: Store | None) -> bool:
        """An event this partition already applied (it arrived again)."""
        return store is not None and self.stateful and store.applied(ev.once_key)

    def apply(
        self,
        ev: Event,
        ctx: Context,
        store: Store | None,
        failed: list[MemberFailed],
        passed: dict[str, int] | None = None,
    ) -> list[Emitted]:
        """The operator on one event. Raises ``Late`` or ``NoKey`` (the event's fate) or
        whatever the user's code raised, with nothing written; a chained member's failure
        on one of its inputs goes to ``failed`` (the caller dead-letters it), the inputs
        each member took to ``passed``."""
        ctx.event_id = ev.id
        if self.window is not None:
            assert store is not None
            self.window.add(store, ev.payload, ev.evt, ev.key)
            store.mark_applied(ev.once_key)
            return []
        # where several operators feed this one, one id can arrive from each: its
        # outputs carry the sender too, so a later stage does not take them for repeats
        base = ev.id if len(self.senders) < 2 else f"{ev.src}:{ev.id}"
        if self.op.key:
            assert store is not None
            return self._apply_keyed(ev, ctx, store, base, failed, passed)
        return self._run(ev.payload, ctx, base, failed, None, passed)

    def _apply_keyed(
        self,
        ev: Event,
        ctx: Context,
        store: Store,
        base: str,
        failed: list[MemberFailed],
        passed: dict[str, int] | None,
    ) -> list[Emitted]:
        """A keyed operator (or a chain it heads) on one event: its key's state, and a
        keyed chain's members' states of that key, saved once the head returned."""
        key = ctx.key = event_key(self.op, ev.payload) if ev.key is None else ev.key
        state = KeyState(store, key_group(key, self.op.key_groups), key)
        ctx.state = state
        if self.keyed_chain:
            members = MemberStates(store, state.group, key)
            result = self._run(ev.payload, ctx, base, failed, members, passed)
            members.save()
        else:
            result = self._run(ev.payload, ctx, base, failed, None, passed)
        state.save()
        store.mark_applied(ev.once_key)
        if self.op.state_ttl_s is not None and len(state):  # the key: ctx.key is the tail's
            self._keep_until(store, state.group, key, ev.evt + self.op.state_ttl_s)
        return result

    def _run(
        self,
        payload: Any,
        ctx: Context,
        base: str,
        failed: list[MemberFailed],
        members: MemberStates | None = None,
        passed: dict[str, int] | None = None,
    ) -> list[Emitted]:
        """The operator's outputs with their ids, checked (a chain checked and numbered
        each member's, then gave them their chained names: not again)."""
        if isinstance(self.impl, ChainedOperator):
            return self.impl.run(payload, ctx, base, failed, members, passed)
        return numbered(self.impl.process(payload, ctx), base, self.name, self.successors)

    def valve(self, store: Any) -> Valve:
        """The partition's valve, from what its store holds."""
        return Valve(self.senders, store.marks, store.watermark)

    def declare(self, valve: Valve, d: Declaration, store: Any) -> list[WindowResult]:
        """One declaration into the partition: the windows it closes, in order."""
        advanced = valve.declare(d)
        store.note_marks(valve.current, valve.marks, set(valve.changed))
        valve.changed.clear()
        if advanced and self.window is not None:
            return self.window.fire(store, valve.current)
        return []

    def fired(
        self,
        result: WindowResult,
        ctx: Context,
        failed: list[MemberFailed],
        passed: dict[str, int] | None = None,
    ) -> list[Emitted]:
        """A closed window's outputs: its result, or what the members chained after the
        window make of it (their ids from the window's, ``<key>@<start>``); a member's
        failure on one of its inputs goes to ``failed``, the inputs each took to
        ``passed``."""
        if not isinstance(self.impl, ChainedOperator) or len(self.impl.steps) == 1:
            return [(None, result.id, result.payload)]
        ctx.event_id = result.id
        return self.impl.after_head(result.payload, ctx, result.id, failed, passed=passed)

    @staticmethod
    def _keep_until(store: Any, group: int, key: str, until: float) -> None:
        """A key's state lives until the watermark passes ``until`` (its latest event's
        time plus the TTL: an older event never shortens it)."""
        current = store.end_of(group, key)
        if current is None or until > current:
            store.set_end(group, key, until)

    def expire(self, valve: Valve, store: Any) -> int:
        """``state_ttl_s``: the keys whose state the watermark has passed, removed."""
        if self.op.state_ttl_s is None or valve.current is None:
            return 0
        gone = store.due(valve.current)
        for group, key, _ in gone:
            store.delete("s", group, key)
            store.set_end(group, key, None)
        return len(gone)

    def declaration(self, part: int, valve: Valve, store: Any) -> Declaration:
        """What this partition declares to its successors. A window operator's open
        windows are outputs still to come, with event times from the oldest one's last
        instant on, and with ``lateness_s`` an event still accepted opens a window ending
        above the watermark less the lateness: it declares below both, and is never idle
        while it holds a window (else a successor could close a window before that result
        reached it)."""
        wm, idle = valve.current, valve.idle
        if self.window is not None:
            if wm is not None and self.window.spec.lateness_s > 0:
                wm = max_timestamp(wm - self.window.spec.lateness_s)
            oldest = store.oldest_end()
            if oldest is not None:
                idle = False
                wm = None if wm is None else min(wm, max_timestamp(oldest))
        return Declaration(self.name, part, self.partitions, wm, idle)
