"""A group of replica slots' work for one epoch of a Spark task (runs in a Spark Python
worker).

The task reads every slot's planned offset range with one consumer (``reading.py``), runs
each replica in its own thread (``slots.py`` says why) through the per-event steps
(``steps.py``), and, with a window, goes on with what upstream produces for the whole
epoch. Inside the epoch every replica checkpoints on its own every ``checkpoint_s``
(``checkpoint``): its outputs flushed, then its counters, progress and keyed state
committed, so an epoch can be long without the monitor, a drain or a retry waiting for
its end. The epoch ends at its deadline; at once when a keyed operator spread over
several tasks (or CPU-bound) changes its count (its partitions' new owners start in the
next epoch) or when the dataplane stops gracefully (``epoch_ends``); or when a replica
thread fails. Clients are cached per worker process (``worker.py``: Spark reuses Python
workers); so is each entry operator's LAS sketch state, which must outlive a task to
become stable.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from queue import Empty
from typing import Any

from elastic_sps.io.knowledge_base import active_count
from elastic_sps.services.dataplane.committing import Commits, cut_results
from elastic_sps.services.dataplane.entry_slot import EntryTask
from elastic_sps.services.dataplane.feed import WINDOW_END, Batch, Feed, size
from elastic_sps.services.dataplane.group import GroupRun
from elastic_sps.services.dataplane.handover import WAKE, Acquire, HandOver, KeyedMoves, Release
from elastic_sps.services.dataplane.occupancy import Occupancy
from elastic_sps.services.dataplane.queues import ServedReport
from elastic_sps.services.dataplane.reading import (
    Reads,
    feed_window,
    read_ahead,
)
from elastic_sps.services.dataplane.slots import Slot
from elastic_sps.services.dataplane.steps import SlotResult, SlotRun
from elastic_sps.services.dataplane.worker import threads


@dataclass
class Span:
    """When a task's live window ends (monotonic), shared by its reader and replicas: a
    window that outlives its task is moved on by the next one (``overlap``), and told
    when its reader stops (``read_ended``), before its replicas finish and commit."""

    deadline: float
    read_ended: Callable[[], None] = lambda: None


@dataclass
class Epoch:
    """How a replica serves its live feed: until ``deadline`` (monotonic; the ``span``'s
    when it has one), checkpointing every ``checkpoint_s`` (0: only at the end)."""

    deadline: float
    checkpoint_s: float = 0.0
    last: float = field(default_factory=time.monotonic)
    span: Span | None = None

    @classmethod
    def staggered(cls, span: Span, checkpoint_s: float, replica_id: int, pool: int) -> Epoch:
        """Replicas started together checkpoint at different moments, the first of
        replica ``i`` of ``pool`` coming ``i / pool`` of an interval early: their flushes
        and commits do not all hold up the worker's events at once."""
        early = checkpoint_s * (replica_id % pool) / pool if pool > 0 else 0.0
        return cls(span.deadline, checkpoint_s, time.monotonic() - early, span)

    def end(self) -> float:
        return self.span.deadline if self.span is not None else self.deadline

    def due(self, now: float) -> bool:
        return self.checkpoint_s > 0 and now - self.last >= self.checkpoint_s

    def wait_s(self, now: float) -> float:
        """How long a take may block: until the next checkpoint, or the deadline."""
        end = self.end()
        until = end if self.checkpoint_s <= 0 else self.last + self.checkpoint_s
        return max(0.0, min(until, end) - now)


class Replica:
    """One replica's thread in a task: its partitions' slots on one clock (a keyed
    operator's replica serves several partitions), and the partitions handed to or
    taken from it inside the epoch (``handover``)."""

    def __init__(self, g: GroupRun, replica_id: int) -> None:
        self.g, self.id = g, replica_id
        self.clock = Occupancy(g.cost_mode, g.op.et_s)
        self.runs: dict[int, SlotRun] = {}
        self.waiting: dict[int, tuple[HandOver, list[Batch]]] = {}
        self.epoch = Epoch(0.0)
        self.commits = Commits(g)
        self.served = ServedReport(g.kb, g.operator)

    def add(self, slot: Slot) -> SlotRun:
        run = SlotRun(self.g, slot)
        run.clock = self.clock
        self.runs[slot.replica] = run
        return run

    def serve_planned(self, slots: list[Slot], records: dict[int, list[Any]]) -> None:
        """Each planned offset range [start, end) (offsets can skip, markers: a slot is
        done up to ``end`` whatever its last record's offset), the partitions' records
        in produce-time order across partitions, each's in offset order."""
        for s in slots:
            self.add(s).prefetch(records[s.replica])
        for msg in heapq.merge(*(records[s.replica] for s in slots), key=_produced_at):
            self.runs[msg.partition() or 0].handle(msg)
        for s in slots:
            run = self.runs[s.replica]
            run.res.next_offset = max(run.res.next_offset, s.end)

    def serve_feed(self, feed: Feed, epoch: Epoch) -> None:
        """What upstream produces, chunk by chunk, until the epoch ends; a checkpoint
        when one is due, whether or not anything arrived."""
        self.epoch = epoch
        self.commits.wake = lambda: feed.put(WAKE)
        while (chunk := _take(feed, epoch, self.held_until())) is not None:
            self.commits.check()
            self.take_in(chunk)
            self.adopt_released()
            for run in self.runs.values():
                run.tick()
            self.g.producer.send()  # the chunk's outputs, staged by its slots
            now = time.monotonic()
            if self.served.due(now):
                self.served.report({j: run.res.next_offset for j, run in self.runs.items()}, now)
            if epoch.due(now) and self.commits.busy():  # due again once that one is done
                epoch.last = now - epoch.checkpoint_s + COMMIT_RETRY_S
            elif epoch.due(now):
                cut = cut_results(list(self.runs.values()))
                if cut is not None:
                    self.commits.checkpoint(cut)
                epoch.last = now

    def held_until(self) -> float | None:
        """When the first of its slots' held-back declarations may go (monotonic)."""
        due = [
            t
            for run in self.runs.values()
            if run.declarer is not None and (t := run.declarer.held_until()) is not None
        ]
        if any(run.entry is not None for run in self.runs.values()):  # a reader's ticks
            due.append(time.monotonic() + ENTRY_TICK_S)
        return min(due, default=None)

    def take_in(self, chunk: list[Any]) -> None:
        """A chunk of feed items: every batch's state read ahead in one trip per
        partition, then each item in order."""
        by_partition: dict[int, list[Batch]] = {}
        moving: set[int] = set()  # records after a hand-over item are the next run's
        for item in chunk:
            if isinstance(item, Release | Acquire):
                moving.add(item.move.partition)
            elif isinstance(item, Batch):
                j = _partition(item)
                if j in self.runs and j not in moving:
                    by_partition.setdefault(j, []).append(item)
        for j, batches in by_partition.items():
            self.runs[j].prefetch([msg for batch in batches for msg in batch.records])
        read_ahead = {id(batch) for batches in by_partition.values() for batch in batches}
        leaving: list[HandOver] = []  # released together: one flush, one commit
        for item in chunk:
            if isinstance(item, Release) and item.move.partition not in self.waiting:
                leaving.append(item.move)
            elif isinstance(item, Release | Acquire):
                self.release(leaving)  # a partition that comes back must have left first
                leaving = []
                if isinstance(item, Release):
                    self.release([item.move])
                elif item.move.partition in self.runs:  # the reader's fault, not the input's
                    raise RuntimeError(f"partition {item.move.partition} acquired while held")
                else:
                    self.waiting[item.move.partition] = (item.move, [])
            elif isinstance(item, Batch):
                j = _partition(item)
                if j in self.waiting:
                    self.waiting[j][1].append(item)
                    continue
                run = self.runs[j]
                if id(item) not in read_ahead:  # adopted in this chunk (``release``)
                    run.prefetch(item.records)
                self.clock.arrive(item.at)
                handle = run.handle
                for msg in item.records:
                    handle(msg)
        self.release(leaving)

    def release(self, moves: list[HandOver]) -> None:
        """Partitions leave: what was handed to them so far committed, then freed, off
        this thread (``committing``): the partitions that stay are served meanwhile. One
        that moves again before it arrived here (two counts in one epoch) is adopted
        first; if its earlier owner does not free it before the epoch's end, it stays
        there, and the next task starts from that owner's commit."""
        leaving = []
        for move in moves:
            if move.partition in self.waiting:
                if not self._arrives(self.waiting[move.partition][0]):
                    # never this task's: what it held is read again from the earlier
                    # owner's commit, and the move on is left for the epoch's end
                    del self.waiting[move.partition]
                    continue
                self.adopt_released()
            leaving.append((move, self.runs.pop(move.partition)))
        if not leaving:
            return
        results = [run.finish() for _, run in leaving]
        for _, run in leaving:
            if run.entry is not None:
                run.entry.released()
        self.commits.release(leaving, results)

    def _arrives(self, earlier: HandOver) -> bool:
        """Whether the earlier owner frees the partition before the epoch ends; the end
        is read again as it waits (a take-over of the window moves it on)."""
        while not earlier.done.wait(ARRIVAL_POLL_S):
            if time.monotonic() >= self.epoch.end():
                return earlier.done.is_set()
        return True

    def adopt_released(self) -> None:
        """Partitions whose old owner has committed: start each where it stopped."""
        for j, (move, held) in list(self.waiting.items()):
            if not move.done.is_set():
                continue
            del self.waiting[j]
            run = self.add(Slot(j, move.next_offset, move.next_offset, owner=self.id))
            run.prefetch([msg for batch in held for msg in batch.records])
            for batch in held:
                self.clock.arrive(batch.at)
                for msg in batch.records:
                    run.handle(msg)

    def finish(self) -> list[SlotResult]:
        """Partitions still waiting when the epoch ends are not this task's: their old
        owner commits them and the next task reads on from there. Its own commits are
        applied first: the next task plans from them."""
        self.commits.settle()
        return [run.finish() for run in self.runs.values()]


def serve_replica(
    g: GroupRun,
    replica_id: int,
    slots: list[Slot],
    records: dict[int, list[Any]],
    feed: Feed | None = None,
    epoch: Epoch | None = None,
) -> list[SlotResult]:
    """One replica's planned ranges, then, with an epoch, what arrives on ``feed`` until
    its deadline (a drain has none): an event taken after the deadline is left for the
    next task, so each slot's progress stays contiguous."""
    replica = Replica(g, replica_id)
    try:
        replica.serve_planned(slots, records)
        if feed is not None and epoch is not None:
            replica.serve_feed(feed, epoch)
        results = replica.finish()
        g.producer.send()  # the thread's last outputs: the task flushes from another thread
    except BaseException:
        replica.commits.join()  # none commits once the task has failed
        g.producer.answered()  # its retry produces again what it produced
        g.producer.discard()
        raise
    return results


CHUNK = 500  # live records taken from a feed at once (their state read in one trip)
# how often a task with no keyed count to watch asks whether its dataplane is stopping:
# a stop may wait this long more, and an idle task costs a fifth of asking every read
STOP_ONLY_CHECK_S = 0.5
COMMIT_RETRY_S = 0.05  # a checkpoint due while the last commit is under way waits this long
ARRIVAL_POLL_S = 0.1  # how often a wait for a partition's earlier owner reads the epoch's end
ENTRY_TICK_S = 0.5  # the longest an entry slot's reader goes without looking at its end


def _produced_at(msg: Any) -> int:
    return int(msg.timestamp()[1])


def _partition(batch: Batch) -> int:
    return batch.records[0].partition() or 0


def _take(feed: Feed, epoch: Epoch, wake_at: float | None = None) -> list[Any] | None:
    """What waits on ``feed`` (taking stops once ``CHUNK`` records are in; none when a
    checkpoint falls due, or ``wake_at`` (monotonic) comes, first); None: the epoch is
    over (an event taken after the deadline is left for the next task)."""
    now = time.monotonic()
    wait = epoch.wait_s(now)
    if wake_at is not None:
        wait = min(wait, max(0.0, wake_at - now))
    try:
        item = feed.get(timeout=wait)
    except Empty:
        return [] if time.monotonic() <= epoch.end() else None
    if item is WINDOW_END or time.monotonic() > epoch.end():
        return None
    chunk, records = [item], size(item)
    while records < CHUNK:
        try:
            item = feed.get_nowait()
        except Empty:
            break
        if item is WINDOW_END:
            feed.put(item)  # seen again by the next take: the window is over
            break
        chunk.append(item)
        records += size(item)
    feed.took(records)
    return chunk


def by_replica(slots: tuple[Slot, ...]) -> list[list[Slot]]:
    out: dict[int, list[Slot]] = {}
    for s in slots:
        out.setdefault(s.replica_id, []).append(s)
    return list(out.values())


def epoch_ends(g: GroupRun, planned: Mapping[str, int], holder: str | None) -> Callable[[], bool]:
    """Whether the epoch must end now: a keyed operator's active count has left the one
    this epoch was planned with (its partitions change owner, which needs new tasks), or
    ``holder``, the dataplane process, is stopping gracefully (``stopping.py``)."""
    names = [] if g.o.settings.fixed_replicas else sorted(planned)
    keys = [g.keys.active(name) for name in names]
    if holder:
        keys.append(g.keys.dataplane_stopping(holder))
    if not keys:
        return lambda: False
    every = 0.0 if names else STOP_ONLY_CHECK_S
    asked = [-math.inf]

    def ends() -> bool:
        now = time.monotonic()
        if now - asked[0] < every:
            return False
        asked[0] = now
        values = g.r.mget(keys)
        if holder and values[-1] is not None:
            return True
        return any(
            active_count(v, g.topo[n].min_replicas, g.topo[n].max_replicas) != planned[n]
            for n, v in zip(names, values, strict=False)
        )

    return ends


def resumed(slots: tuple[Slot, ...], committed: Mapping[Any, Any]) -> tuple[Slot, ...]:
    """Each stateless slot from where its partition was checkpointed, if that is past
    its planned start: a retried task (Spark gives a failed task's slots to a new
    attempt) goes on where the failed attempt's last checkpoint left off, as a replayed
    batch does (``slots.plan_slots``), not from the start of its epoch."""
    done = {int(k): int(v) for k, v in committed.items()}
    out = []
    for s in slots:
        at = done.get(s.replica, 0)
        out.append(replace(s, start=max(s.start, at), end=max(s.end, at)) if at > s.start else s)
    return tuple(out)


def run_windowed(
    g: GroupRun,
    slots: tuple[Slot, ...],
    records: dict[int, list[Any]],
    deadline: float | Span,
    stop: Callable[[], bool],
    moves_in_task: bool = False,
    entry: EntryTask | None = None,
    lane: int = 0,
) -> list[SlotResult]:
    """Every replica in its own thread; the live ones go on with what upstream produces
    until ``deadline`` (or ``stop``), so an event crosses several operators within one
    task. ``moves_in_task``: this task serves every partition of a keyed operator, so
    a new count is handed over inside it (``handover``). ``deadline``: a ``Span`` when the
    window may outlive its task (``overlap``); ``lane``: the reader's consumer."""
    every = g.o.settings.checkpoint_s
    span = deadline if isinstance(deadline, Span) else Span(deadline)
    queues: dict[int, Feed] = {}
    futures = []

    def start(replica_id: int, own: list[Slot]) -> Feed | None:
        feed = None if own and own[0].drain else queues.setdefault(replica_id, Feed())
        epoch = Epoch.staggered(span, every, replica_id, g.op.max_replicas)
        args = (g, replica_id, own, records, feed, epoch)
        futures.append(threads().submit(serve_replica, *args))
        return feed

    for r in by_replica(slots):
        start(r[0].replica_id, r)
    feeds = {s.replica: queues[s.replica_id] for s in slots if not s.drain}
    starts = {s.replica: s.end for s in slots if not s.drain}

    def spawn(replica_id: int) -> Feed:
        feed = start(replica_id, [])
        assert feed is not None
        return feed

    moves = KeyedMoves(g, g.active, queues, spawn) if moves_in_task else None

    def failed() -> bool:
        """A replica thread that raised (its operator failing the task, a lost server)
        ends the epoch now: the task fails with it instead of reading on for the rest of
        the epoch while the replica's partitions stall."""
        return any(f.done() and f.exception() is not None for f in futures)

    reads = entry.reads if entry is not None else Reads(g.source_ends)
    try:
        ahead = read_ahead(g.op.et_s)
        feed_window(
            g.o,
            g.topic,
            feeds,
            starts,
            lambda: span.deadline,
            lambda: stop() or failed(),
            moves,
            reads,
            ahead,
            lane,
        )
    finally:
        span.read_ended()
        if entry is not None:  # what the next epoch's planned read must not count again
            entry.save(reads.read_to)
    return [res for f in futures for res in f.result()]
