"""A slot of the entry operator with ``admission: entry`` (``admission.py``): it reads one
source partition, admits each chunk (decode, LAS, the counts and the id ledger) before
the engine's steps see it, and declares the partition's watermark as its reader."""

from __future__ import annotations

import time
from typing import Any, Protocol

from elastic_sps.io.envelope import Envelope
from elastic_sps.io.marks import WATERMARK_FIELD
from elastic_sps.io.watermarks import Declaration
from elastic_sps.services.dataplane.admission import EntryClock, dead_record, decode_chunk
from elastic_sps.services.dataplane.declaring import Declarer
from elastic_sps.services.dataplane.group import GroupRun
from elastic_sps.services.dataplane.reading import Reads
from elastic_sps.services.dataplane.slots import Slot


class EntryTask:
    """The entry step's part of a task: the partitions it serves declared active before
    any of their records is handled (one may have been left idle by the last epoch: the
    ingress declared every partition active at its first events likewise), the planned
    records counted as arrivals but those an earlier task's reader counted, and where
    counting got to, for the next task."""

    def __init__(self, g: GroupRun, slots: tuple[Slot, ...]) -> None:
        assert g.admission is not None
        self.g = g
        g.admission.serve((s.replica for s in slots), g.partitions)
        raw = g.r.hgetall(g.keys.arrivals_read(g.operator))
        self.reads = Reads(g.source_ends, g.arrivals.received, paused=g.source_paused)
        self.reads.counted = {int(j): int(at) for j, at in raw.items()}
        self._declare_active([s.replica for s in slots])

    def _declare_active(self, partitions: list[int]) -> None:
        g, pipe = self.g, self.g.r.pipeline(transaction=False)
        for j in partitions:
            pipe.hget(g.keys.watermarks(g.operator, j), WATERMARK_FIELD)
        for j, wm in zip(partitions, pipe.execute(), strict=True):
            body = Declaration(g.operator, j, g.partitions, float(wm) if wm else None).encode()
            for topic, partition in g.declare_to:
                g.producer.produce(topic, body, partition=partition)

    def planned(self, records: dict[int, list[Any]], began: float) -> None:
        """The planned records as arrivals (a read that began at ``began``)."""
        counted = self.reads.counted
        fresh = [m for j, r in records.items() for m in r if (m.offset() or 0) >= counted.get(j, 0)]
        self.g.arrivals.received(fresh, began, False)
        for j, r in records.items():
            if r:
                counted[j] = max(counted.get(j, 0), (r[-1].offset() or 0) + 1)
        self.save(counted)

    def save(self, read_to: dict[int, int]) -> None:
        """Counted up to ``read_to``: never lowered (a retry may read less)."""
        counted = self.reads.counted
        merged = {j: max(at, counted.get(j, 0)) for j, at in read_to.items()}
        if merged:
            self.g.r.hset(self.g.keys.arrivals_read(self.g.operator), mapping=merged)


class Declaring(Protocol):
    """The slot's side of the watermark protocol: its valve takes a declaration and
    offers what follows to its declarer."""

    declarer: Declarer | None

    def declared(self, d: Declaration, msg: Any) -> None: ...


class EntrySlot:
    """One source partition's admission and reader clock, in the slot (``steps.SlotRun``)
    that serves it: ``admit`` before the engine's steps, ``tick`` between chunks."""

    def __init__(self, g: GroupRun, partition: int) -> None:
        assert g.admission is not None and g.board is not None
        self.g, self.partition = g, partition
        self.gate, self.board = g.admission, g.board
        self.clock = EntryClock(g.o.settings.idle_s, g.board)
        self.las_keys: dict[int, bytes | None] = {}  # offset -> an admitted event's LAS key
        self.decided_to = 0  # every record below this offset has its fate decided

    def admit(self, run: Declaring, msgs: list[Any], decoded: dict[int, Any], res: Any) -> None:
        """``msgs`` (one partition's, in offset order) as events: the admitted ones into
        ``decoded`` by offset, the undecodable dead-lettered, the shed counted (and kept
        on the shed topic if asked), the fates into ``res`` (a ``SlotResult``: published
        with the progress they reflect). A partition declared idle, or not declared yet
        by this slot (it may have been idle as its last owner left it), is woken first."""
        if not msgs:
            return
        g, now = self.g, time.time()
        self.decided_to = max(self.decided_to, (msgs[-1].offset() or 0) + 1)
        events, bad = decode_chunk(self.gate.spec, msgs, now)
        for msg, reason in bad:
            g.producer.produce(g.o.deadletter_topic, dead_record(msg, reason, now), partition=0)
        last = run.declarer.last if run.declarer is not None else None
        if last is None or last.idle:
            self._wake(run)
        verdicts = self.gate.admit([(ev, key) for _, ev, key in events], now)
        counts = {"admitted": 0, "shed": 0, "unkeyed": 0, "dead_lettered": len(bad)}
        for (offset, ev, key), admitted in zip(events, verdicts, strict=True):
            self.clock.clock.read(ev.event_time)  # read, shed or not
            if admitted is None:
                counts["shed"] += 1
                if g.o.settings.write_shed:
                    g.producer.produce(g.o.settings.topics.shed, ev.encode(), partition=0)
                continue
            counts["admitted"] += 1
            counts["unkeyed"] += key is None
            decoded[offset] = (admitted, None)
            self.las_keys[offset] = key.encode() if key else None
            if res.ids is not None:
                res.ids.add(g.operator, "sent", admitted.id)
        for name, n in counts.items():
            res.admission[name] = res.admission.get(name, 0) + n
        g.arrivals.decided(counts)

    def event(self, offset: int, decoded: dict[int, Any]) -> tuple[Envelope, bytes | None] | None:
        """The admitted event at ``offset`` and its LAS key; None: shed or dead-lettered.
        A record never admitted here is the engine's fault, not the input's: it would
        leave uncounted."""
        got = decoded.pop(offset, None)
        if got is None:
            if offset >= self.decided_to:
                raise RuntimeError(f"partition {self.partition} offset {offset}: never admitted")
            return None
        return got[0], self.las_keys.pop(offset, None)

    def _wake(self, run: Declaring) -> None:
        """Records again after an idle declaration: the task's other idle partitions are
        declared active, then this one, before its events leave."""
        with self.board.lock:
            self.board.wake(self.g.producer, self.g.declare_to, self.partition)
            self.clock.seen = self.board.seq
            self.clock.clock.wake()
            run.declared(Declaration("source", 0, 1, self.clock.clock.wm, False), None)

    def tick(self, run: Declaring, next_offset: int) -> None:
        """The partition's declaration now (idle once at its end for ``idle_s``, from the
        reader's last view of the end), and what the slot's declarer held back."""
        end = self.g.source_ends.get(self.partition)
        # a paused partition's end is as of its last fetch: it may be behind
        paused = self.partition in self.g.source_paused
        at_end = end is not None and next_offset >= end and not paused
        with self.board.lock:
            d = self.clock.declaration(at_end)
            last = run.declarer.last if run.declarer is not None else None
            if last is not None and last.idle and not d.idle:  # it resumes: wake the others
                self.board.wake(self.g.producer, self.g.declare_to, self.partition)
                self.clock.seen = self.board.seq
            run.declared(d, None)
            declarer = run.declarer
            assert declarer is not None
            declarer.send_held()
            if declarer.last is not None and declarer.last.idle:
                self.board.idle[self.partition] = declarer.last
            else:
                self.board.idle.pop(self.partition, None)

    def released(self) -> None:
        """The partition moves to another replica: no longer this slot's to wake."""
        with self.board.lock:
            self.board.idle.pop(self.partition, None)
