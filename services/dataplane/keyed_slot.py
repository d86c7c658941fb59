"""A keyed or window operator's share of a replica slot: its partition's store
(``shared.io.state_store``), the key and state each event gets, the windows it fires, and
the commit of state with the offset it reflects (after the task's outputs are flushed)."""

from __future__ import annotations

import logging
import time

from services.dataplane.group import GroupRun
from shared.io.envelope import Envelope
from shared.io.state_store import PartitionStore
from shared.model.keyed import key_group
from shared.pipeline.operators import Context, Output, normalise
from shared.pipeline.stateful import KeyState, WindowResult, event_key, state_fields

log = logging.getLogger("sps.dataplane")


class KeyedSlot:
    def __init__(self, g: GroupRun, partition: int, owner: int) -> None:
        self.g, self.partition, self.owner = g, partition, owner
        self.store = PartitionStore(g.r, g.keys, g.operator, partition)
        self.first_at: float | None = None  # when this task served its first event

    def done_before(self, offset: int) -> bool:
        """An event a previous attempt of this range already applied (and committed)."""
        return self.store.committed is not None and offset < self.store.committed

    def prefetch(self, events: list[Envelope]) -> None:
        """The state the events will read, in one round trip."""
        op = self.g.op
        self.store.prefetch(
            [f for ev in events for f in state_fields(op, ev.payload, ev.event_time)]
        )

    def process(self, ev: Envelope, ctx: Context) -> Output:
        """The operator on one event: a window adds it to its windows (raises ``Late``);
        a keyed operator runs with ``ctx.key`` and ``ctx.state`` (raises ``NoKey``)."""
        if self.first_at is None:
            self.first_at = time.time()
        g = self.g
        if g.aggregator is not None:
            g.aggregator.add(self.store, ev.payload, ev.event_time, ev.input, time.time())
            return []
        key = event_key(g.op, ev.payload)
        ctx.key = key
        ctx.state = KeyState(self.store, key_group(key, g.op.key_groups), key)
        return normalise(g.impl.process(ev.payload, ctx), g.operator, g.successor_names)

    def fire(self) -> list[WindowResult]:
        if self.g.aggregator is None:
            return []
        return self.g.aggregator.fire(self.store, time.time())

    def commit(self, next_offset: int) -> bool:
        """State and ``next_offset`` at once; False: fenced (another attempt committed
        this range first: nothing of this one's is applied)."""
        # a retry that skipped what an earlier attempt committed never moves it back
        next_offset = max(next_offset, self.store.committed or 0)
        done = self.store.commit(next_offset, self.owner)
        if not done:
            log.warning(
                "%s[%d]: state not committed: the partition moved past offset %s meanwhile "
                "(a retried or duplicate task); its effects were applied once, by the other",
                self.g.operator,
                self.partition,
                self.store.committed,
            )
        return done


def window_envelope(g: GroupRun, result: WindowResult, partition: int) -> Envelope:
    """A fired window as an event: its id ``<key>@<start>``, its event time the window's
    end, its latency counted from now (when the window closed)."""
    return Envelope(
        result.id, time.time(), g.operator, result.payload, part=partition, evt=float(result.end)
    )


def handover_pause(store: PartitionStore, owner: int, first_at: float) -> tuple[float, bool] | None:
    """Seconds from the partition's last commit to this task's first event of it, and
    whether the partition changed owner in between (a moved partition's events waited
    that long for the move; an unmoved one's for the batch boundary alone). None: no
    commit before."""
    if store.handover is None:
        return None
    before, at = store.handover
    return max(0.0, first_at - at), before != owner
