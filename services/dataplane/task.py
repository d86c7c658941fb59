"""One Spark task of the dataplane's source (``source.OperatorReader.read``): a group of
replica slots of one operator, served for an epoch (``replica.py``), or taken over from
the window of an earlier task that outlived it (``overlap.py``)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from elastic_sps.services.dataplane.entry_slot import EntryTask
from elastic_sps.services.dataplane.group import GroupRun
from elastic_sps.services.dataplane.options import SourceOptions
from elastic_sps.services.dataplane.overlap import (
    claim,
    serve,
    signature,
    slot_rows,
    take_over,
)
from elastic_sps.services.dataplane.publishing import TaskSpan, publish
from elastic_sps.services.dataplane.reading import (
    free_lane,
    read_slots,
    take_lane,
    warm_consumers,
)
from elastic_sps.services.dataplane.replica import (
    by_replica,
    epoch_ends,
    resumed,
    run_windowed,
    serve_replica,
)
from elastic_sps.services.dataplane.slots import Slot, SlotRow
from elastic_sps.services.dataplane.worker import WORKER, threads


def run_group(
    o: SourceOptions,
    operator: str,
    slots: tuple[Slot, ...],
    active: int,
    serve_s: float = 0,
    keyed_active: Mapping[str, int] | None = None,
    moves_in_task: bool = False,
    holder: str | None = None,
    warm: bool = False,
    batch: tuple[tuple[tuple[Slot, ...], ...], str] = ((), ""),
) -> list[SlotRow]:
    """``serve_s``: windowed, how long the task serves (``source._serve_seconds``; the
    task window when the driver did not say); ``keyed_active``: the counts the epoch
    was planned with of the keyed operators whose moves need new tasks (a change ends
    it); ``moves_in_task``: this operator's moves are handed over inside this task;
    ``holder``: the task's dataplane process (its graceful stop ends the epoch), which
    a task past the warm-up batch (not ``warm``) records as it starts serving (its
    /health waits for that); ``batch``: every group of the operator's slots this batch
    and the batch's name (with overlapping windows, the task serves the group it
    claims: ``overlap.claim``). Its rows are none when its window goes on past it: the
    window publishes what it did as it commits, whichever task owns it then."""
    WORKER.freeze_heap_once()
    began, began_at = time.monotonic(), time.time()
    g = GroupRun(o, operator, active)
    window = o.task_window_s
    overlap_s = o.settings.epoch_overlap_s if window > 0 else 0.0
    deadline = began + (serve_s or window)
    stop = epoch_ends(g, keyed_active or {}, holder) if window > 0 else (lambda: False)
    peers, name = batch
    if overlap_s > 0 and name and len(peers) > 1 and slots in peers:
        index = peers.index(slots)
        slots = claim(g, peers, index, name, keyed_active or {}, moves_in_task)
    if holder and not warm:
        g.r.sadd(g.keys.tasks_serving, holder)
    if overlap_s > 0:
        # the warm-up batch and a draining slot's task end with their epoch
        outlive = 0.0 if warm or any(s.drain for s in slots) else overlap_s
        key = signature(g, slots, keyed_active or {}, moves_in_task)
        if taken := take_over(g, slots, key, deadline, outlive, stop):
            return taken.wait(deadline, outlive)
        lane = take_lane(o, g.topic)
        try:
            slots, records, entry = _planned(g, slots, lane, 2)
        except BaseException:
            free_lane(o, g.topic, lane)
            raise
        task = (deadline, began_at, sum(len(r) for r in records.values()), outlive)
        return serve(g, slots, records, task, stop, moves_in_task, entry, lane, key, holder)
    slots, records, entry = _planned(g, slots, 0, 1)
    backlog = sum(len(r) for r in records.values())
    if window > 0:
        results = run_windowed(g, slots, records, deadline, stop, moves_in_task, entry)
    else:
        replicas = by_replica(slots)
        served = threads().map(lambda r: serve_replica(g, r[0].replica_id, r, records), replicas)
        results = [res for group in served for res in group]
    g.producer.flush()  # downstream events first: their ends must be recorded before commit
    publish(g, results, TaskSpan(began_at, time.time(), backlog))
    return slot_rows(slots, results)


def _planned(
    g: GroupRun, slots: tuple[Slot, ...], lane: int, lanes: int
) -> tuple[tuple[Slot, ...], dict[int, list[Any]], EntryTask | None]:
    """The slots as resumed, their planned records read with ``lane``'s consumer, and the
    entry step's part of the task (its planned records counted as arrivals). With
    overlaps, ``lanes`` consumers per topic are warmed: a window past its task may
    hold the first."""
    topics = tuple({g.topic, *(g.keys.topic(name) for name in g.topo.names)})
    warm_consumers(g.o, topics, lanes)
    if not g.op.stateful:  # a keyed slot skips what its partition committed by itself
        slots = resumed(slots, g.r.hgetall(g.keys.committed(g.operator)))
    began_read = time.time()
    records = read_slots(g.o, g.topic, slots, lane)
    entry = EntryTask(g, slots) if g.admits else None
    if entry is not None:
        entry.planned(records, began_read)
    return slots, records, entry
