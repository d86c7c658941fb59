"""How a micro-batch's replica slots are packed into Spark tasks.

A replica is a unit of capacity, not a Spark task: one task per replica per micro-batch
costs ~35 ms of a 2-core machine whatever it reads (measured, local[2]), so a query's
cycle grew linearly with its active replicas and
scaling out *cost* latency. Instead each task serves a group of replica slots, each slot
in its own thread (``task.run_group``): a ``wait``-bound replica releases the GIL while
occupied, so slots in one task run concurrently; ``cpu``-bound operators get one task per
core (``tasks_per_query``). A slot that has nothing to read costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from elastic_sps.io.durability import lost_state
from elastic_sps.model.keyed import owner


class SlotRow(NamedTuple):
    """What a task reports per slot served: a row of the source's schema."""

    replica: int
    start: int
    end: int
    processed: int
    emitted: int
    dead_lettered: int
    busy_s: float


_SPARK_TYPES = dict(replica="INT", start="LONG", end="LONG", processed="LONG", emitted="LONG",
                    dead_lettered="LONG", busy_s="DOUBLE")  # fmt: skip
SLOT_ROW_SCHEMA = ", ".join(f"{name} {_SPARK_TYPES[name]}" for name in SlotRow._fields)


@dataclass(frozen=True)
class Slot:
    """One replica's share of a micro-batch: its partition's offsets [start, end)."""

    replica: int
    start: int
    end: int
    drain: bool = False  # an inactive slot emptying what it still holds
    standby: bool = False  # an inactive slot with nothing to do, served for the window
    owner: int = -1  # a keyed operator's: the active replica serving this partition

    @property
    def replica_id(self) -> int:
        """The replica (thread, clock) that serves the slot."""
        return self.owner if self.owner >= 0 else self.replica

    @property
    def events(self) -> int:
        return max(0, self.end - self.start)


def plan_slots(
    start: dict,
    end: dict,
    pool: int,
    active: int,
    progress: dict | None = None,
    standby: bool = False,
    from_progress: bool = False,
) -> list[Slot]:
    """Every active slot, plus each inactive slot that still holds events (it drains).

    ``standby``: every inactive slot is served for the task's window, its planned range
    and then what reaches it meanwhile (a declaration is read in the window it arrives
    in, so an idle partition is empty at the next plan). A scale-out then takes effect
    as soon as the upstream routers read the new count (``replica.GroupRun.routing``,
    every ``ROUTING_REFRESH_S``), not at the next micro-batch. An idle standby slot
    costs a blocked thread.

    ``progress``: how far each partition was really processed, when tasks read past their
    planned range (``task_window_s``, ``replica.py``): a slot starts there, not at Spark's
    offset, so nothing is processed twice. ``from_progress``: there even when it is behind
    Spark's offset (a window that outlived its task, ``overlap``, may have ended before it
    reached the end its next task was planned with); a partition with none recorded
    starts at Spark's offset."""
    slots = []
    for j in range(pool):
        s, e = int(start.get(str(j), 0)), int(end.get(str(j), 0))
        if progress is not None and from_progress and str(j) in progress:
            s = int(progress[str(j)])
            e = max(e, s)
        elif progress is not None:  # a batch replayed after a restart ends behind it
            s = max(s, int(progress.get(str(j), 0)))
            e = max(e, s)
        if j < active:
            slots.append(Slot(j, s, e))
        elif standby:  # what it holds, and what reaches it before the window ends
            slots.append(Slot(j, s, e, standby=True))
        elif e > s:
            slots.append(Slot(j, s, e, drain=True))
    return slots


def plan_keyed_slots(
    start: dict,
    end: dict,
    pool: int,
    active: int,
    progress: dict | None = None,
    operator: str = "?",
    stateful: bool = True,
) -> list[Slot]:
    """A keyed operator's: every partition, each served by the active replica owning it
    (``elastic_sps.model.keyed.owner``); a partition starts where its state was committed
    (the knowledge base holds both), else at Spark's offset, which is then 0 (a fresh
    run, or a partition that never got an event). Past 0 with no commit, Redis lost the
    partition's state and commit: ``StateLostError``, not a start with empty state
    (``stateful`` False: partitions owned without state, as the entry step's source
    partitions are, start at Spark's offset then)."""
    if stateful and progress is not None and (lost := lost_partitions(start, pool, progress)):
        raise lost_state(operator, lost)
    slots = []
    for j in range(pool):
        s, e = int(start.get(str(j), 0)), int(end.get(str(j), 0))
        if progress is not None and str(j) in progress:
            s = int(progress[str(j)])
            e = max(e, s)
        slots.append(Slot(j, s, e, owner=owner(j, pool, active)))
    return slots


def lost_partitions(start: dict, pool: int, progress: dict) -> dict[int, int]:
    """The partitions (-> Spark's start offset) Spark has moved past 0 that have no
    committed offset in the knowledge base."""
    starts = {j: int(start.get(str(j), 0)) for j in range(pool)}
    return {j: s for j, s in starts.items() if s > 0 and str(j) not in progress}


def pack(
    slots: list[Slot], tasks: int, keep_idle: bool = False, stable: bool = False
) -> list[tuple[Slot, ...]]:
    """Spread the slots that have events over at most ``tasks`` groups, largest first onto
    the lightest group (LPT), so the tasks of one micro-batch end at about the same time;
    the slots of one replica (a keyed operator's partitions) stay together. Always at
    least one group: Spark still runs the batch and commits its offsets. ``keep_idle``:
    active slots with nothing planned are served too (they read what arrives during the
    task's window). ``stable``: replicas dealt round the groups in their order instead,
    so the same replicas plan the same groups from batch to batch (a window that
    outlives its task is taken over only by a task with its slots: ``overlap``)."""
    bundles: dict[int, list[Slot]] = {}
    for s in slots:
        if s.events or (keep_idle and not s.drain):
            bundles.setdefault(s.replica_id, []).append(s)
    busy = sorted(bundles.values(), key=lambda b: -sum(s.events for s in b))
    n = max(1, min(tasks, len(busy)))
    if stable:
        dealt = [bundles[r] for r in sorted(bundles)]
        return [tuple(s for b in dealt[k::n] for s in b) for k in range(n)]
    groups: list[list[Slot]] = [[] for _ in range(n)]
    load = [0] * n
    for b in busy:
        k = load.index(min(load))
        groups[k].extend(b)
        load[k] += sum(s.events for s in b) or 1  # idle slots (keep_idle) spread too
    return [tuple(g) for g in groups]


def capped_end(start: int, end: int, max_events: int) -> int:
    """A slot reads at most ``max_events`` per micro-batch, so one batch stays short."""
    return min(end, start + max_events)


def serve_seconds(window_s: float, planned_s: list[float]) -> float:
    """How long every task of a micro-batch serves its slots: the task window, or the
    longest planned slot's occupancy (events × et) when that is longer.

    Spark ends a micro-batch when its slowest task does. With the bare window, in a spike
    the slots whose planned range was short stopped at the window and sat idle while the
    longest (up to ``max_batch_s`` of work) finished: 8 replicas delivered ~630 events/s
    of a nominal 800. Serving until the longest one ends costs no latency (the batch
    lasts that long anyway) and lets every slot take what arrives meanwhile."""
    return max([window_s, *planned_s])


def planned_occupancy(slots: list[Slot], cost_mode: str, et_s: float) -> list[float]:
    """Each slot's planned work in seconds; unknown (none) without a per-event cost."""
    if cost_mode not in ("wait", "cpu") or et_s <= 0:
        return []
    return [s.events * et_s for s in slots]


def max_events_per_slot(cost_mode: str, et_s: float, batch_s: float, hard_cap: int) -> int:
    """With a per-event cost, as many events as one replica gets through in ``batch_s``."""
    if cost_mode in ("wait", "cpu") and et_s > 0:
        return max(1, min(hard_cap, int(batch_s / et_s)))
    return hard_cap


def tasks_per_operator(cpu_bound: bool, tasks_per_query: int, cores: int) -> int:
    """How many Spark tasks (processes) a micro-batch may serve an operator's replica
    slots in: a CPU-bound operator's replicas need cores, so one task per replica up to
    the cores; a waiting one's share ``tasks_per_query`` tasks as threads."""
    return max(tasks_per_query, cores) if cpu_bound else tasks_per_query
