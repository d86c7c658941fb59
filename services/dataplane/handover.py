"""A keyed operator's partitions (or an entry operator's source partitions, with
admission at the entry step) change owner inside a running task (Megaphone's idea):
the task's reader, which hands each partition's records to its owner's thread, learns
the new count, puts a ``Release`` in the old owner's feed and an ``Acquire`` in the new
owner's, and sends the partition's later records to the new owner. The old owner
serves what it was handed before the ``Release``, commits the partition's state with
that offset and says where it stopped; the new owner holds the partition's records until
then and starts exactly there. Only the moving partitions pause; per-partition order and
the once-per-event check hold, since the offset and state pass through one commit."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import RedisError

from elastic_sps.io.knowledge_base import Keys, KnowledgeBase
from elastic_sps.io.rescale_timeline import record_effect
from elastic_sps.model.keyed import groups_of_partition, moved_partitions, owner
from elastic_sps.model.operator import Operator
from elastic_sps.services.dataplane.feed import Feed
from elastic_sps.services.dataplane.group import GroupRun

log = logging.getLogger("sps.dataplane")

WAKE = object()  # a feed item that only wakes its replica (a partition it waits for is free)


@dataclass
class HandOver:
    """One partition moving to ``owner``; ``next_offset`` is where the old owner
    stopped, set before ``done``."""

    partition: int
    owner: int
    to: Feed  # the new owner's feed: woken once the partition is free
    done: threading.Event = field(default_factory=threading.Event)
    next_offset: int = 0

    def released(self, next_offset: int) -> None:
        self.next_offset = next_offset
        self.done.set()
        self.to.put(WAKE)


@dataclass(frozen=True)
class Release:
    move: HandOver


@dataclass(frozen=True)
class Acquire:
    move: HandOver


class KeyedMoves:
    """The reader's side: called between reads with the partition -> feed routing; on
    a new count it reroutes every moving partition (``spawn`` starts the thread of a
    replica this task does not run yet) and records when the change took effect."""

    def __init__(
        self,
        g: GroupRun,
        active: int,
        queues: dict[int, Feed],
        spawn: Callable[[int], Feed],
    ) -> None:
        self.g, self.active, self.queues, self.spawn = g, active, queues, spawn
        self.recording: threading.Thread | None = None

    def __call__(self, feeds: dict[int, Feed]) -> None:
        if self.g.o.settings.fixed_replicas:
            return
        count = self.g.kb.active(self.g.op)
        if count == self.active:
            return
        pool = self.g.partitions
        moving = {
            j: new
            for j in sorted(feeds)
            if (new := owner(j, pool, count)) != owner(j, pool, self.active)
        }
        # the new threads first: an old owner then finds its partitions' releases
        # together in its feed and commits them at once (``Replica.take_in``)
        for new in sorted(set(moving.values()) - set(self.queues)):
            self.queues[new] = self.spawn(new)
        for j, new in moving.items():
            move = HandOver(j, new, self.queues[new])
            feeds[j].put(Release(move))
            self.queues[new].put(Acquire(move))
            feeds[j] = self.queues[new]
        before, self.active = self.active, count
        self.g.active = count
        # recorded off the reader's thread: the partitions that stay are read on meanwhile
        args = (self.recording, before, count, time.time())
        self.recording = threading.Thread(target=self._record, args=args, name="sps-move-record")
        self.recording.start()

    def _record(self, earlier: threading.Thread | None, before: int, after: int, at: float) -> None:
        if earlier is not None:  # the moves in the order they took effect
            earlier.join()
        try:
            if self.g.op.stateful:  # a stateless entry operator's partitions move no state
                record_move(self.g.kb, self.g.op, before, after, at)
            record_effect(self.g.r, self.g.keys, self.g.operator, after, at)
        except RedisError as exc:
            op = self.g.operator
            log.warning("%s: the move %d -> %d not recorded: %r", op, before, after, exc)


def record_move(kb: KnowledgeBase, spec: Operator, before: int, after: int, now: float) -> None:
    """A keyed operator's resize: which partitions and key groups change owner, and the
    bytes of state they hold (read by their new owners from Redis, never copied)."""
    moved = moved_partitions(spec.max_replicas, before, after)
    groups = [g for p in moved for g in groups_of_partition(p, spec.key_groups, spec.max_replicas)]
    members = [m.name for m in spec.keyed_members]
    size = state_bytes(kb.r, kb.keys, spec.name, groups, members)
    kb.record_move(spec.name, before, after, moved, len(groups), size, now)


def state_bytes(
    redis: Any, keys: Keys, operator: str, groups: Iterable[int], members: Iterable[str] = ()
) -> int:
    """What the key groups' state holds in Redis (``MEMORY USAGE`` of each hash), a keyed
    chain's ``members``' beside its head's."""
    pipe = redis.pipeline(transaction=False)
    groups = list(groups)
    names = [keys.state(operator, g) for g in groups] + [keys.windows(operator, g) for g in groups]
    names += [keys.member_state(operator, m, g) for m in members for g in groups]
    for name in names:
        pipe.memory_usage(name)
    return int(sum(v or 0 for v in pipe.execute()))
