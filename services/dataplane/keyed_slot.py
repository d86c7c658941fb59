"""A keyed or window operator's share of a replica slot: its partition's store
(``elastic_sps.io.state_store``), read and written by the engine's core, and the commit of
state with the offset, ids and watermarks it reflects (after the task's outputs are
flushed)."""

from __future__ import annotations

import logging
import time
from functools import partial

from elastic_sps.io.envelope import Envelope
from elastic_sps.io.state_store import Commit, Fenced, PartitionStore
from elastic_sps.pipeline.stateful import WindowResult, key_or_none, state_fields
from elastic_sps.services.dataplane.group import GroupRun

log = logging.getLogger("sps.dataplane")


class KeyedSlot:
    def __init__(self, g: GroupRun, partition: int, owner: int) -> None:
        self.g, self.partition, self.owner = g, partition, owner
        self.store = PartitionStore(g.r, g.keys, g.operator, partition)
        self.first_at: float | None = None  # when this task served its first event
        self.fenced = False  # another attempt committed the partition: this one stops

    def done_before(self, offset: int) -> bool:
        """An event a previous attempt of this range already applied (and committed)."""
        return self.store.committed is not None and offset < self.store.committed

    def prefetch(self, events: list[Envelope]) -> list[str | None]:
        """The state the events will read, and whether they were applied, in one trip;
        returns each event's key (None: it has none), extracted once for the engine."""
        op, window = self.g.op, self.g.core.window
        fields = window.fields if window is not None else partial(state_fields, op)
        keys = [key_or_none(op, ev.payload) for ev in events]
        self.store.prefetch(
            [
                f
                for ev, key in zip(events, keys, strict=True)
                if key is not None
                for f in fields(key, ev.event_time)
            ],
            [f"{ev.src}>{ev.id}" for ev in events],  # Event.once_key
        )
        return keys

    def started(self, now: float) -> None:
        if self.first_at is None:
            self.first_at = now

    def due(self, start: int, next_offset: int) -> Commit | None:
        """The partition's writes as of now if it has any to commit (events read since
        ``start``, never committed, or writes buffered); None: none, or fenced."""
        store = self.store
        if next_offset > start or store.committed is None or store.dirty:
            return self.prepare(next_offset)
        return None

    def prepare(self, next_offset: int) -> Commit | None:
        """The partition's writes as of now, for ``apply`` once the outputs before now
        are delivered; None: fenced."""
        if self.fenced:
            return None
        # a retry that skipped what an earlier attempt committed never moves it back
        next_offset = max(next_offset, self.store.committed or 0)
        try:  # it may read the open windows first
            return self.store.prepare(next_offset, self.owner)
        except Fenced:
            self._overtaken()
            return None

    def apply(self, prepared: Commit) -> bool:
        if self.fenced:
            return False
        done = self.store.apply(prepared)
        if not done:
            self._overtaken()
        return done

    def _overtaken(self) -> None:
        self.fenced = True  # nothing more of this attempt's is applied, nor handed on
        log.warning(
            "%s[%d]: not committed: another attempt committed the partition since this "
            "one opened at offset %s (a retried or duplicate task); its effects stand",
            self.g.operator,
            self.partition,
            self.store.committed,
        )


def window_envelope(g: GroupRun, result: WindowResult) -> Envelope:
    """A fired window as an event: its id ``<key>@<start>``, its event time its window's
    last instant, its latency counted from now (when the window closed)."""
    return Envelope(result.id, time.time(), g.operator, result.payload, evt=result.event_time)


def handover_pause(store: PartitionStore, owner: int, first_at: float) -> tuple[float, bool] | None:
    """Seconds from the partition's last commit to this task's first event of it, and
    whether the partition changed owner in between (a moved partition's events waited
    that long for the move; an unmoved one's for the batch boundary alone). None: no
    commit before."""
    if store.handover is None:
        return None
    before, at = store.handover
    return max(0.0, first_at - at), before != owner
