"""A slot of the entry operator with ``admission: entry`` (``admission.py``): it reads one
source partition, admits each chunk (decode, LAS, the counts and the id ledger) before
the engine's steps see it, and declares the partition's watermark as its reader."""

from __future__ import annotations

import time
from typing import Any, Protocol

from elastic_sps.io.envelope import Envelope
from elastic_sps.io.id_ledger import IdBatch
from elastic_sps.io.watermarks import Declaration
from elastic_sps.services.dataplane.admission import EntryClock, dead_record, decode_chunk
from elastic_sps.services.dataplane.declaring import Declarer
from elastic_sps.services.dataplane.group import GroupRun


class Declaring(Protocol):
    """The slot's side of the watermark protocol: its valve takes a declaration and
    offers what follows to its declarer."""

    declarer: Declarer | None

    def _declared(self, d: Declaration, msg: Any) -> None: ...


class EntrySlot:
    def __init__(self, g: GroupRun, partition: int) -> None:
        assert g.admission is not None and g.board is not None
        self.g, self.partition = g, partition
        self.gate, self.board = g.admission, g.board
        self.clock = EntryClock(g.o.settings.idle_s, g.board)
        self.las_keys: dict[int, bytes | None] = {}  # offset -> an admitted event's LAS key

    def admit(
        self, run: Declaring, msgs: list[Any], decoded: dict[int, Any], ids: IdBatch | None
    ) -> None:
        """``msgs`` (one partition's, in offset order) as events: the admitted ones into
        ``decoded`` by offset, the undecodable dead-lettered, the shed counted (and kept
        on the shed topic if asked). A partition declared idle is woken first."""
        if not msgs:
            return
        g, now = self.g, time.time()
        events, bad = decode_chunk(self.gate.spec, msgs, now)
        for msg, reason in bad:
            g.producer.produce(g.o.deadletter_topic, dead_record(msg, reason, now), partition=0)
        last = run.declarer.last if run.declarer is not None else None
        if last is not None and last.idle:
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
            if ids is not None:
                ids.add(g.operator, "sent", admitted.id)
        g.arrivals.add(counts)

    def event(self, offset: int, decoded: dict[int, Any]) -> tuple[Envelope, bytes | None] | None:
        """The admitted event at ``offset`` and its LAS key; None: shed or dead-lettered."""
        got = decoded.pop(offset, None)
        if got is None:
            return None
        return got[0], self.las_keys.pop(offset, None)

    def _wake(self, run: Declaring) -> None:
        """Records again after an idle declaration: the task's other idle partitions are
        declared active, then this one, before its events leave."""
        with self.board.lock:
            self.board.wake(self.g.producer, self.g.declare_to, self.partition)
            self.clock.seen = self.board.seq
            self.clock.clock.wake()
            run._declared(Declaration("source", 0, 1, self.clock.clock.wm, False), None)

    def tick(self, run: Declaring, next_offset: int) -> None:
        """The partition's declaration now (idle once at its end for ``idle_s``, from the
        reader's last view of the end), and what the slot's declarer held back."""
        end = self.g.source_ends.get(self.partition)
        at_end = end is not None and next_offset >= end
        with self.board.lock:
            run._declared(self.clock.declaration(at_end), None)
            declarer = run.declarer
            assert declarer is not None
            declarer.send_held()
            if declarer.last is not None and declarer.last.idle:
                self.board.idle[self.partition] = declarer.last
            else:
                self.board.idle.pop(self.partition, None)
