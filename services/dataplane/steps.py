"""A replica slot's per-event steps around the engine's core (``elastic_sps.pipeline.engine``):
decode → expire → operate → emit → account, with the replica's cost clock
(``occupancy.Occupancy``), and the watermark declarations read in line (``declaring``).
"""

from __future__ import annotations

import base64
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

import orjson

from elastic_sps.control.routing import Routers
from elastic_sps.io.envelope import BadEvent, Envelope, decode
from elastic_sps.io.id_ledger import IdBatch
from elastic_sps.io.state_store import Fenced
from elastic_sps.io.watermarks import Declaration, Valve, decode_declaration, is_declaration
from elastic_sps.pipeline.chain import MemberFailed
from elastic_sps.pipeline.engine import Emitted, Event
from elastic_sps.pipeline.failures import Failure, describe
from elastic_sps.pipeline.operators import Context
from elastic_sps.pipeline.stateful import Late, NoKey, WindowResult
from elastic_sps.services.dataplane.declaring import Declarer, Marks
from elastic_sps.services.dataplane.entry_slot import EntrySlot
from elastic_sps.services.dataplane.group import GroupRun
from elastic_sps.services.dataplane.keyed_slot import KeyedSlot, window_envelope
from elastic_sps.services.dataplane.occupancy import Occupancy
from elastic_sps.services.dataplane.sample import LatencySample
from elastic_sps.services.dataplane.slots import Slot

# An operator's ``ctx.writes`` go to Redis in one round trip per this many writes or this
# many seconds, and at the slot's end: sent only at the slot's end, a sink's writes would
# hold the batch's end back while no task reads; spread out, they overlap the serving.
WRITES_BATCH = 500
WRITES_EVERY_S = 0.1
# A slot folds its operator's successes into the task's failure guard (behind a lock) per
# this many events, at a failure and at its end: not per event.
OKS_FOLD = 256
NOT_CUT: Any = object()  # a SlotResult's ``commit`` when no checkpoint's cut took it


def writes_due(stacked: int, since_s: float) -> bool:
    """Whether ``stacked`` writes, the last sent ``since_s`` ago, go out now."""
    return stacked >= WRITES_BATCH or (stacked > 0 and since_s >= WRITES_EVERY_S)


@dataclass
class SlotResult:
    replica: int
    received_from: dict[str, float] = field(default_factory=dict)
    processed: int = 0
    emitted: int = 0
    emitted_to: dict[str, float] = field(default_factory=dict)  # per successor, Eq. 6
    dead: int = 0
    members_dead: int = 0  # chained members' own failed inputs (the chain's event processed)
    incomplete: int = 0  # the chain's events one of whose members failed (never all out)
    expired: int = 0
    late: int = 0  # window events that arrived after their windows closed
    fired: int = 0  # windows closed and emitted
    repeats: int = 0  # events this keyed partition had applied already (same id)
    state_expired: int = 0  # keys whose state outlived state_ttl_s
    marks: Any = None  # a stateless partition's watermarks (declaring.Marks), if changed
    keyed: Any = None  # a keyed operator's KeyedSlot: committed after the flush
    # a checkpoint's cut (``committing.cut_result``): its keyed writes taken then
    # (``PartitionStore.prepare``; None: nothing to commit), applied once delivered
    commit: Any = NOT_CUT
    busy: float = 0.0
    latencies: LatencySample = field(default_factory=lambda: LatencySample(200))
    queuing: LatencySample = field(default_factory=lambda: LatencySample(500))
    las_keys: list[int] = field(default_factory=list)
    las_times: list[float] = field(default_factory=list)
    ids: IdBatch | None = None  # the id ledger's entries, when tracking is on
    start: int = 0  # the offset the slot began at
    next_offset: int = 0  # processed up to here (exclusive)
    probes: list[str] = field(default_factory=list)
    # the entry step's fates of what it admitted since the last checkpoint (admitted,
    # shed, dead_lettered, unkeyed): published with the progress they reflect
    admission: dict[str, int] = field(default_factory=dict)


class SlotRun:
    """One replica slot's work in one task: ``handle`` each record in offset order (an
    event through the engine's core, or a watermark declaration into the partition's
    valve), then ``finish``. Clients and routers are set up at the first event, so a slot
    that gets nothing costs nothing."""

    def __init__(self, g: GroupRun, slot: Slot) -> None:
        self.g, self.slot = g, slot
        self.res = SlotResult(slot.replica, ids=IdBatch(g.keys.prefix) if g.track_ids else None)
        self.res.start = self.res.next_offset = slot.start
        self.clock = Occupancy(g.cost_mode, g.op.et_s)
        self.ctx: Context | None = None
        self.routers: Routers | None = None
        self.written_at = time.perf_counter()
        self.oks = 0  # successes not yet folded into the guard (``_fold``)
        self.passed: dict[str, int] = {}  # per chained member, likewise
        # a keyed or window operator's partition state, committed with its offset
        self.keyed = KeyedSlot(g, slot.replica, slot.owner) if g.op.stateful else None
        # offset -> the event decoded by prefetch, with its key (None: none found)
        self._decoded: dict[int, tuple[Envelope, str | None]] = {}
        self.valve: Valve | None = None  # the partition's, at its first declaration
        self.declarer: Declarer | None = None
        # admission at the entry step: the slot reads a source partition
        self.entry = EntrySlot(g, slot.replica) if g.admits else None

    def _ready(self) -> Context:
        g = self.g
        if self.ctx is None:
            self.ctx = Context(g.operator, g.r, g.keys.prefix, g.r.pipeline(transaction=False))
        if self.routers is None:
            self.routers = g.routers(self.slot.replica)
        self.routers.refresh()
        return self.ctx

    def handle(self, msg: Any) -> None:
        """One record: a declaration, or an event through decode → expire → operate →
        emit → account (LAS sampling, ``t_out`` and the id ledger are the optional parts)."""
        offset = msg.offset() or 0
        if offset >= self.res.next_offset:
            self.res.next_offset = offset + 1
        if self.declarer is not None and self.entry is None:  # an entry slot's: ``tick``
            self.declarer.send_held()
        keyed = self.keyed
        if keyed is not None and (keyed.fenced or keyed.done_before(offset)):
            return
        try:
            self._handle(msg, offset)
        except Fenced:
            assert keyed is not None
            keyed.fenced = True

    def _handle(self, msg: Any, offset: int) -> None:
        # a record ``prefetch`` decoded is an event: not asked again whether it declares
        if self.entry is None and offset not in self._decoded and is_declaration(msg.value()):
            self.declared(decode_declaration(msg.value()), msg)
            return
        ctx = self._ready()
        ev, key, record_key = self._event(msg, offset)
        # the clocks are read once each per event: the wall's (expiry, latencies) and the
        # cost clock's at the start and the end of the work
        now, began = time.time(), time.perf_counter()
        if ev is None or self._expired(ev, now):
            return
        event = Event(ev.id, ev.payload, ev.event_time, ev.src, key)
        store = self.keyed.store if self.keyed is not None else None
        if self.g.core.repeat(event, store):
            self.res.repeats += 1
            return
        outputs = self._operate(ev, event, ctx, msg, now)
        if outputs is None:
            return
        ended = time.perf_counter()
        occupied = self.clock.end(began, ended)
        self._emit(ev, outputs, record_key)
        self._account(ev, record_key, occupied, now + (ended - began))
        self._write_out(ctx, ended)

    def _event(self, msg: Any, offset: int) -> tuple[Envelope | None, str | None, Any]:
        """The record's event (None: shed, or dead-lettered), its key for a keyed
        operator, and the record key its outputs carry (the LAS key)."""
        if self.entry is not None:
            got = self.entry.event(offset, self._decoded)
            return (None, None, None) if got is None else (got[0], None, got[1])
        ev, key = self._decoded.pop(offset, None) or (self._decode(msg), None)
        return ev, key, msg.key()

    def tick(self) -> None:
        """Between chunks: an entry slot's partition declared as its reader sees it, and
        any slot's held-back declaration sent once its interval has passed."""
        if self.entry is not None:
            self.entry.tick(self, self.res.next_offset)
        elif self.declarer is not None:
            self.declarer.send_held()

    def _partition_marks(self) -> Any:
        if self.keyed is not None:
            return self.keyed.store
        if self.res.marks is None:
            g = self.g
            self.res.marks = Marks(g.r, g.keys.watermarks(g.operator, self.slot.replica))
        return self.res.marks

    def declared(self, d: Declaration, msg: Any) -> None:
        """A declaration into the partition (read in ``msg``, or None: the entry step's
        own): fire what it closes, declare onwards."""
        g, store = self.g, self._partition_marks()
        if self.valve is None:
            self.valve = g.core.valve(store)
            self.declarer = Declarer(g.producer, g.declare_to)
        fired = g.core.declare(self.valve, d, store)
        self.res.state_expired += g.core.expire(self.valve, store)
        ctx = self._ready() if fired else None
        for result in fired:
            assert ctx is not None
            outputs = self._fired(result, ctx, msg)
            self._emit(window_envelope(g, result), outputs, result.id.encode())
            self.res.fired += 1
        assert self.declarer is not None
        self.declarer.offer(g.core.declaration(self.slot.replica, self.valve, store))

    def _fired(self, result: WindowResult, ctx: Context, msg: Any) -> list[Emitted]:
        """A closed window's outputs, through the members chained after it; an input a
        member raises on is dead-lettered (or the member's guard stops the dataplane)."""
        failed: list[MemberFailed] = []
        outputs = self.g.core.fired(result, ctx, failed, self.passed)
        if failed:
            self._members_failed(failed, msg)
        return outputs

    def _write_out(self, ctx: Context, now: float) -> None:
        """Send the operator's stacked writes when ``WRITES_BATCH`` are waiting or
        ``WRITES_EVERY_S`` has passed since ``now`` (perf_counter; at least once, as every
        write: they are sent before the batch's offsets are recorded, so a retried task
        sends them again)."""
        if writes_due(len(ctx.writes), now - self.written_at):
            ctx.writes.execute()
            self.written_at = now

    def prefetch(self, msgs: list[Any]) -> None:
        """A keyed operator's: decode ``msgs`` ahead (``handle`` takes them from here) and
        read the state they need, and whether they were applied, in one round trip; an
        entry slot's: admit them (``entry_slot``)."""
        if self.entry is not None:
            self.entry.admit(self, msgs, self._decoded, self.res)
            return
        keyed = self.keyed
        if keyed is None or keyed.fenced or not msgs:
            return
        events, offsets = [], []
        for msg in msgs:
            offset = msg.offset() or 0
            if keyed.done_before(offset) or is_declaration(msg.value()):
                continue
            try:
                ev = decode(msg.value())
            except BadEvent:
                continue  # handle dead-letters it
            offsets.append(offset)
            events.append(ev)
        try:
            keys = keyed.prefetch(events)
        except Fenced:
            keyed.fenced = True
            return
        for offset, ev, key in zip(offsets, events, keys, strict=True):
            self._decoded[offset] = (ev, key)

    def _decode(self, msg: Any) -> Envelope | None:
        try:
            return decode(msg.value())
        except BadEvent as exc:  # not an envelope: not from this project's producers
            self.res.dead += 1
            self.g.dead_letter(self.slot.replica, msg, describe(exc))
            return None

    def _expired(self, ev: Envelope, now: float) -> bool:
        g, ids = self.g, self.res.ids
        if g.t_out and now - (ev.adm or ev.ts) > g.t_out:
            self.res.expired += 1  # PA-SPS t_out: too old to be worth processing
            if ids is not None:
                ids.add(g.operator, "expired", ev.id)
            return True
        return False

    def _operate(
        self, ev: Envelope, event: Event, ctx: Context, msg: Any, now: float
    ) -> list[Emitted] | None:
        """The engine's core on one event; ``None``: the user's code raised, and the
        event is dead-lettered (or the guard stops the dataplane: ``on_error``); an event
        with no key, or late for every window, ends with that fate (the operator is not
        at fault). A fenced read propagates: the slot stops."""
        g = self.g
        if self.keyed is not None:
            self.keyed.started(now)
        failed: list[MemberFailed] = []
        store = self.keyed.store if self.keyed else None
        try:
            result = g.core.apply(event, ctx, store, failed, self.passed)
        except Fenced:
            raise
        except (NoKey, Late) as exc:
            kind = "late" if isinstance(exc, Late) else "dead"
            self._fate(kind, ev, msg, Failure(type(exc).__name__, str(exc), ""))
            return None
        except Exception as exc:  # the user's code: any exception is its failure
            failure = describe(exc)
            with g.guard_lock:
                self._fold()  # the slot's successes before it, in order
                g.guard.failed(failure)  # raises OperatorFailing when it must stop
            self._fate("dead", ev, msg, failure)
            return None
        if failed:
            self._members_failed(failed, msg)
            self.res.incomplete += 1
            if self.res.ids is not None:
                self.res.ids.add(g.operator, "incomplete", ev.id)
        self.oks += 1  # the head took it
        if self.oks >= OKS_FOLD:
            with g.guard_lock:
                self._fold()
        return result

    def _members_failed(self, failed: list[MemberFailed], msg: Any) -> None:
        """Chained members' failures on their own inputs: each dead-lettered with that
        input's id and payload, and judged by the member's guard, as the member unchained
        would be (a key missing is the input's fate, not counted)."""
        for f in failed:
            failure = describe(f.error)
            if not isinstance(f.error, NoKey):
                with self.g.guard_lock:
                    self._fold()  # the slot's successes before it, in order
                    self.g.member_guards[f.operator].failed(failure)  # may stop it
            self.res.members_dead += 1
            payload = orjson.dumps(f.payload, default=_b64)
            self.g.dead_letter(self.slot.replica, msg, failure, f.event_id, payload)
            if self.res.ids is not None:
                self.res.ids.add(self.g.operator, "members_dead", f.event_id)

    def _fold(self) -> None:
        """The slot's successes into the guards (the caller holds ``guard_lock``)."""
        if self.oks:
            self.g.guard.ok(self.oks)
            self.oks = 0
        for member, n in self.passed.items():
            self.g.member_guards[member].ok(n)
        self.passed.clear()

    def _fate(self, kind: str, ev: Envelope, msg: Any, failure: Failure) -> None:
        """A dead-lettered event (``late``: counted apart, dead-lettered with the reason)."""
        if kind == "late":
            self.res.late += 1
        else:
            self.res.dead += 1
        self.g.dead_letter(self.slot.replica, msg, failure, ev.id)
        if self.res.ids is not None:
            self.res.ids.add(self.g.operator, kind, ev.id)

    def _account(self, ev: Envelope, key: bytes | None, occupied: float, now: float) -> None:
        """``key``: the record's; ``now``: the wall clock when the event's work ended."""
        g, res = self.g, self.res
        res.busy += occupied
        res.processed += 1
        if ev.lasc is not None:  # a LAS probe: answer Δ, naming the probe
            res.probes.append(f"{ev.id} {now - ev.lasc!r}")
        if ev.adm is not None:
            res.queuing.add(1000.0 * (now - ev.adm))
        res.received_from[ev.src] = res.received_from.get(ev.src, 0.0) + 1
        if g.entry:
            res.las_keys.append(las_key(key, ev))
            res.las_times.append(occupied)
        if res.ids is not None:
            res.ids.add(g.operator, "processed", ev.id)
        if not g.successors:
            res.latencies.add(1000.0 * (now - ev.ts))

    def _emit(self, ev: Envelope, outputs: list[Emitted], key: Any) -> None:
        """``ev``'s outputs, each with its own id: to the operator's output topic, if it
        has one, and to the successors' replicas (staged: the replica sends them after
        its chunk, and anything produced or flushed after them follows them)."""
        g, res = self.g, self.res
        if g.op.output:  # its own topic, beside its successors if it has any
            for _, out_id, payload in outputs:
                g.producer.stage(g.op.output, output_record(out_id, payload), None, key)
        if not g.successors:
            return
        routers = self.routers
        assert routers is not None  # set up by _ready before the event's first step
        for dst, out_id, payload in outputs:
            body = Envelope(out_id, ev.ts, g.operator, payload, evt=ev.evt).encode()
            for s in [dst] if dst is not None else g.successors:
                partition = routers.choose(s, payload)
                g.producer.stage(g.successor_topics[s], body, partition=partition, key=key)
                res.emitted += 1
                res.emitted_to[s] = res.emitted_to.get(s, 0.0) + 1
                if res.ids is not None:
                    res.ids.add(s, "sent", out_id)

    def finish(self) -> SlotResult:
        self.clock.settle()
        if self.oks or self.passed:
            with self.g.guard_lock:
                self._fold()
        if self.entry is not None:  # the reader's last word: what it read this epoch
            self.entry.tick(self, self.res.next_offset)
        if self.declarer is not None:
            self.declarer.flush()
        if self.keyed is not None:
            self.res.keyed = self.keyed
        if self.ctx is not None:
            self.ctx.writes.execute()  # what is left of the operator's writes (_write_out)
        return self.res


def las_key(key: bytes | None, ev: Envelope) -> int:
    """The attribute the LAS sketches key on: the record key the ingress set."""
    return zlib.crc32(key if key else ev.id.encode()) % ((1 << 31) - 1)


def output_record(event_id: str, value: Any) -> bytes:
    """A sink's output as its topic carries it: ``{"id", "value"}`` (bytes as base64)."""
    return orjson.dumps({"id": event_id, "value": value}, default=_b64)


def _b64(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
