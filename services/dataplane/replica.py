"""A group of replica slots' work for one micro-batch (runs in a Spark Python worker).

The task reads every slot's offset range with one consumer (``reading.py``), then runs
each slot in its own thread (``slots.py`` says why) through the per-event steps
(``steps.py``), and publishes once (``publishing.py``): one producer flush, one Redis
pipeline, one metrics record per slot. Clients are cached per worker process
(``worker.py``: Spark reuses Python workers); so is each entry operator's LAS sketch
state, which must outlive a batch to become stable.
"""

from __future__ import annotations

import heapq
import time
from queue import Empty, SimpleQueue
from typing import Any

from elastic_sps.services.dataplane.group import GroupRun
from elastic_sps.services.dataplane.options import SourceOptions
from elastic_sps.services.dataplane.publishing import TaskSpan, publish
from elastic_sps.services.dataplane.reading import (
    WINDOW_END,
    feed_window,
    read_slots,
    warm_consumers,
)
from elastic_sps.services.dataplane.slots import Slot, SlotRow
from elastic_sps.services.dataplane.steps import SlotResult, SlotRun
from elastic_sps.services.dataplane.worker import WORKER, threads


def serve_replica(
    g: GroupRun,
    slots: list[Slot],
    records: dict[int, list[Any]],
    feed: SimpleQueue | None = None,
    deadline: float = 0,
) -> list[SlotResult]:
    """One replica's slots (a keyed operator's replica serves several partitions, one
    clock): each planned offset range [start, end) (offsets can skip, markers: a slot is
    done up to ``end`` whatever its last record's offset), then, with a window, what
    arrives on ``feed`` until ``deadline`` (a drain has none): an event taken after the
    deadline is left for the next batch, so each slot's progress stays contiguous."""
    runs = {s.replica: SlotRun(g, s) for s in slots}
    clock = runs[slots[0].replica].clock
    for s in slots:
        runs[s.replica].clock = clock
        runs[s.replica].prefetch(records[s.replica])
    # the partitions' planned records in produce-time order across partitions, each
    # partition's in offset order (heapq.merge compares heads only)
    planned = heapq.merge(*(records[s.replica] for s in slots), key=_produced_at)
    for msg in planned:
        runs[msg.partition() or 0].handle(msg)
    for s in slots:
        run = runs[s.replica]
        run.res.next_offset = max(run.res.next_offset, s.end)
    while feed is not None:
        chunk = _take(feed, deadline)
        if chunk is None:
            break
        by_partition: dict[int, list[Any]] = {}
        for msg, _ in chunk:
            by_partition.setdefault(msg.partition() or 0, []).append(msg)
        for j, msgs in by_partition.items():
            runs[j].prefetch(msgs)
        for msg, arrived in chunk:
            clock.arrive(arrived)
            runs[msg.partition() or 0].handle(msg)
    return [run.finish() for run in runs.values()]


CHUNK = 500  # live records taken from a feed at once (their state read in one trip)


def _produced_at(msg: Any) -> int:
    return int(msg.timestamp()[1])


def _take(feed: SimpleQueue, deadline: float) -> list[tuple[Any, float]] | None:
    """What waits on ``feed`` (at least one record, at most ``CHUNK``); None: the window
    is over (an event taken after the deadline is left for the next batch)."""
    item = feed.get()
    if item is WINDOW_END or time.monotonic() > deadline:
        return None
    chunk = [item]
    while len(chunk) < CHUNK:
        try:
            item = feed.get_nowait()
        except Empty:
            break
        if item is WINDOW_END:
            feed.put(item)  # seen again by the next take: the window is over
            break
        chunk.append(item)
    return chunk


def by_replica(slots: tuple[Slot, ...]) -> list[list[Slot]]:
    out: dict[int, list[Slot]] = {}
    for s in slots:
        out.setdefault(s.replica_id, []).append(s)
    return list(out.values())


def run_windowed(
    g: GroupRun, slots: tuple[Slot, ...], records: dict[int, list[Any]], deadline: float
) -> list[SlotResult]:
    """Every replica in its own thread; the live ones go on with what upstream produces
    until ``deadline``, so an event crosses several operators within one micro-batch."""
    replicas = by_replica(slots)
    queues: dict[int, SimpleQueue] = {
        r[0].replica_id: SimpleQueue() for r in replicas if not r[0].drain
    }
    feeds = {s.replica: queues[s.replica_id] for s in slots if not s.drain}
    futures = [
        threads().submit(serve_replica, g, r, records, queues.get(r[0].replica_id), deadline)
        for r in replicas
    ]
    starts = {s.replica: s.end for s in slots if not s.drain}
    feed_window(g.o, g.topic, feeds, starts, deadline)
    return [res for f in futures for res in f.result()]


def run_group(
    o: SourceOptions, operator: str, slots: tuple[Slot, ...], active: int, serve_s: float = 0
) -> list[SlotRow]:
    """``serve_s``: windowed, how long the task serves (``slots.serve_seconds``; the
    task window when the driver did not say)."""
    WORKER.freeze_heap_once()
    began, began_at = time.monotonic(), time.time()
    g = GroupRun(o, operator, active)
    warm_consumers(o, tuple(g.keys.topic(name) for name in g.topo.names))
    records = read_slots(o, g.topic, slots)
    backlog = sum(len(r) for r in records.values())
    window = o.task_window_s
    if window > 0:
        results = run_windowed(g, slots, records, began + max(window, serve_s))
    else:
        replicas = by_replica(slots)
        served = threads().map(lambda r: serve_replica(g, r, records), replicas)
        results = [res for group in served for res in group]
    g.producer.flush()  # downstream events first: their ends must be recorded before commit
    publish(g, results, TaskSpan(began_at, time.time(), backlog))
    by_slot = {s.replica: s for s in slots}
    return [
        SlotRow(
            r.replica,
            by_slot[r.replica].start,
            r.next_offset,
            r.processed,
            r.emitted,
            r.dead,
            r.busy,
        )
        for r in results
    ]
