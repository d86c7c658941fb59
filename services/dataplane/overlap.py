"""Epochs that overlap (``SPS_EPOCH_OVERLAP_S``): a task's live window goes on past the
end of its epoch, in threads of its Spark Python worker, while Spark ends the batch,
plans the next one and launches its tasks (a time in which nothing would be read),
until the next epoch's task for the same slots takes it over. In the same worker that
task moves the window's end on and waits with it: no pause. In another worker, or with
slots planned differently, it asks the window to end (``Keys.overlap_end``), waits for
its commit, and starts from there as a retried task does. A window no task takes over
ends ``overlap_s`` after its task's epoch, committing as an epoch's end does.

Who serves a partition past its task is recorded in Redis with an expiry
(``Keys.overlap``): a task of another worker or driver waits for it to end, or for the
record to lapse if its process died (what it did since its last checkpoint is then
read again: at least once, as for any failure).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from redis.exceptions import RedisError

from elastic_sps.io.marks import text
from elastic_sps.services.dataplane.entry_slot import EntryTask
from elastic_sps.services.dataplane.group import GroupRun
from elastic_sps.services.dataplane.publishing import TaskSpan, publish
from elastic_sps.services.dataplane.reading import free_lane
from elastic_sps.services.dataplane.replica import Span, run_windowed
from elastic_sps.services.dataplane.slots import Slot, SlotRow
from elastic_sps.services.dataplane.steps import SlotResult
from elastic_sps.services.dataplane.worker import WORKER

log = logging.getLogger("sps.dataplane")

TAKE_OVER_MARGIN_S = 0.5  # a window with less than this left is let end, not taken over
RECORD_SLACK_S = 3.0  # a window's record outlives its overlap by this
FINAL_COMMIT_S = 35.0  # a window that stopped reading past its task: its flush and commit
HANDOFF_POLL_S = 0.005
SLOW_POLL_AFTER_S, SLOW_POLL_S = 1.0, 0.05  # then the wait for a lapse polls less often
_REGISTRY_LOCK = threading.Lock()


def signature(
    g: GroupRun, slots: tuple[Slot, ...], planned: Mapping[str, int], moves_in_task: bool
) -> tuple:
    """What a task must plan the same for the window of an earlier one to go on as its
    own: the operator, each slot's partition, replica and role, the counts, where its
    keyed moves happen."""
    roles = tuple(sorted((s.replica, s.replica_id, s.standby) for s in slots))
    counts = tuple(sorted(planned.items()))
    return (g.keys.prefix, g.operator, roles, g.active, counts, moves_in_task)


def _open_windows() -> dict[tuple, Window]:
    windows: dict[tuple, Window] = WORKER.get("overlapping_windows", dict)
    return windows


class Window:
    """A task's live window (``replica.run_windowed``) in a thread of its own, which may
    outlive the task: whoever owns it last commits it as it ends (``_run``). Its state
    changes under ``lock``: ``ending`` (it stops reading, none may take it over),
    ``outliving`` (its task returned, its partitions recorded), ``ended``."""

    def __init__(
        self, g: GroupRun, slots: tuple[Slot, ...], key: tuple, lane: int, holder: str | None
    ) -> None:
        self.g, self.slots, self.key, self.lane = g, slots, key, lane
        self.holder = holder or ""
        self.token = uuid.uuid4().hex
        self.span = Span(0.0, read_ended=self._closing)
        self.stop: Callable[[], bool] = lambda: False  # the owning task's (``epoch_ends``)
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.ending = self.ended = self.outliving = False
        self.rows: list[SlotRow] = []
        self.error: BaseException | None = None

    def start(
        self, run: Callable[[Callable[[], bool]], list[SlotResult]], began_at: float, backlog: int
    ) -> None:
        args = (run, began_at, backlog)
        threading.Thread(target=self._run, args=args, name="sps-window", daemon=True).start()

    def _ends(self) -> bool:
        """The owner's reasons to end, or, once outliving, a task that needs the slots;
        decided under the lock, so no task takes over a window that is ending."""
        with self.lock:
            end = self.stop() or (
                self.outliving and bool(self.g.r.exists(self.g.keys.overlap_end(self.token)))
            )
            if end and not self.ending and self.outliving:
                self._extend()  # its last chunks, flush and commit to come
            self.ending = self.ending or end
            return end

    def _run(
        self, run: Callable[[Callable[[], bool]], list[SlotResult]], began_at: float, backlog: int
    ) -> None:
        try:
            results = run(self._ends)
            self._closing()
            self.g.producer.flush()  # downstream events first: their ends before the commit
            publish(self.g, results, TaskSpan(began_at, time.time(), backlog))
            self.rows = slot_rows(self.slots, results)
        except BaseException as exc:  # the owner raises it; outliving, the next task replays
            self.error = exc
            if self.outliving:
                log.warning("a window past its task failed; read again from its commit: %r", exc)
        finally:
            try:
                self._release()
            finally:
                self.done.set()

    def _closing(self) -> None:
        """It has stopped reading: none may take it over; past its task, its record now
        covers its flush and commit."""
        with self.lock:
            self.ending = True
            if self.outliving:
                self._extend()

    def _extend(self) -> None:
        """Its records (those it still has) kept for ``FINAL_COMMIT_S``; best effort: a
        failure leaves them to lapse, the window's commit still made."""
        try:
            pipe = self.g.r.pipeline(transaction=False)
            for s in self.slots:
                key = self.g.keys.overlap(self.g.operator, s.replica)
                pipe.set(key, self._mark(), px=int(1000 * FINAL_COMMIT_S), xx=True)
            pipe.execute()
        except RedisError as exc:
            log.warning("a window's records not extended: %r", exc)

    def _release(self) -> None:
        with self.lock:
            self.ended = self.ending = True
            with _REGISTRY_LOCK:
                if _open_windows().get(self.key) is self:
                    del _open_windows()[self.key]
        try:
            self._unrecord()
        except RedisError as exc:  # its records lapse on their own
            log.warning("a window's records not removed: %r", exc)
        free_lane(self.g.o, self.g.topic, self.lane)

    def own(self, task_deadline: float, overlap_s: float, stop: Callable[[], bool]) -> bool:
        """A new task takes the window over: it serves on to ``task_deadline`` (plus the
        overlap) under the new task's ``stop``. False if it is ending or about to (its
        record then stays until it has committed). A Redis failure changes nothing."""
        with self.lock:
            left = self.span.deadline - time.monotonic()
            if self.ending or left < TAKE_OVER_MARGIN_S:
                return False
            self._unrecord()
            self.stop, self.outliving = stop, False
            self.span.deadline = task_deadline + overlap_s
        return True

    def wait(self, task_deadline: float, overlap_s: float) -> list[SlotRow]:
        """The owning task's side: the window's rows if it ends by ``task_deadline``,
        else none, the window going on past the task, recorded for the next one (a
        window that is ending is waited for; with no ``overlap_s``, every window)."""
        self.done.wait(max(0.0, task_deadline - time.monotonic()) if overlap_s > 0 else None)
        with self.lock:
            if not self.ending:
                try:
                    self._record(overlap_s + RECORD_SLACK_S)
                    self.outliving = True
                    with _REGISTRY_LOCK:
                        _open_windows()[self.key] = self
                    return []
                except RedisError as exc:  # unrecorded, it must not serve on: it ends now
                    log.warning("a window not recorded past its task; it ends: %r", exc)
                    self.stop, self.span.deadline = (lambda: True), time.monotonic()
        self.done.wait()
        if self.error is not None:
            raise self.error
        return self.rows

    def _record(self, lapse_s: float) -> None:
        pipe = self.g.r.pipeline(transaction=False)
        for s in self.slots:
            key = self.g.keys.overlap(self.g.operator, s.replica)
            pipe.set(key, self._mark(), px=int(1000 * lapse_s))
        pipe.execute()

    def _mark(self) -> str:
        return f"{self.holder}|{self.token}"

    def _unrecord(self) -> None:
        """Its records gone, those still its own (another window may have taken a lapsed
        one since)."""
        keys = [self.g.keys.overlap(self.g.operator, s.replica) for s in self.slots]
        values = self.g.r.mget(keys)
        mark = self._mark()
        mine = [k for k, v in zip(keys, values, strict=True) if v is not None and text(v) == mark]
        if mine:
            self.g.r.delete(*mine)


def slot_rows(slots: tuple[Slot, ...], results: list[SlotResult]) -> list[SlotRow]:
    by_slot = {s.replica: s for s in slots}
    return [
        SlotRow(
            r.replica,
            by_slot[r.replica].start if r.replica in by_slot else r.start,
            r.next_offset,
            r.processed,
            r.emitted,
            r.dead,
            r.busy,
        )
        for r in results
    ]


CLAIM_TTL_S = 3600  # a batch's claims outlive any of its tasks' retries


def claim(
    g: GroupRun,
    groups: tuple[tuple[Slot, ...], ...],
    index: int,
    batch: str,
    planned: Mapping[str, int],
    moves_in_task: bool,
) -> tuple[Slot, ...]:
    """Which of ``batch``'s ``groups`` of the operator task ``index`` serves: the one its
    earlier attempt claimed (a retry); else one whose window this worker still serves,
    if no other task took it first; else its own; else the first no task took. Spark
    gives the batch's tasks to whichever Python workers are idle, so a task's own group
    often lives in another worker's window, whose end and commit it would wait for.
    As many tasks as groups, each claiming one (``SET NX``): each group served once."""
    keys = [g.keys.overlap_claim(batch, k) for k in range(len(groups))]
    for k, v in enumerate(g.r.mget(keys)):
        if v is not None and text(v) == str(index):
            return groups[k]
    with _REGISTRY_LOCK:
        open_keys = set(_open_windows())
    local = [
        k
        for k, slots in enumerate(groups)
        if signature(g, slots, planned, moves_in_task) in open_keys
    ]
    rest = [k for k in range(len(groups)) if k not in local and k != index]
    for k in [*local, index, *rest]:
        if g.r.set(keys[k], str(index), nx=True, ex=CLAIM_TTL_S):
            return groups[k]
    raise RuntimeError(f"{g.operator}: batch {batch}: every group claimed before task {index}")


def take_over(
    g: GroupRun,
    slots: tuple[Slot, ...],
    key: tuple,
    task_deadline: float,
    overlap_s: float,
    stop: Callable[[], bool],
) -> Window | None:
    """This worker's window of an earlier task with the same slots, now this task's; else
    None, once every window still serving one of ``slots``' partitions has ended and
    committed (asked to, here or in another worker; a lapsed record: its process died)."""
    with _REGISTRY_LOCK:
        window = _open_windows().get(key)
    if window is not None and window.own(task_deadline, overlap_s, stop):
        return window
    keys = [g.keys.overlap(g.operator, s.replica) for s in slots]
    holders = {text(v) for v in g.r.mget(keys) if v is not None}
    if not holders:
        return None
    pipe = g.r.pipeline(transaction=False)
    for mark in holders:
        pipe.set(g.keys.overlap_end(mark.split("|", 1)[-1]), "1", ex=60)
    pipe.execute()
    # a window ends at most its overlap past its task, then commits
    asked = time.monotonic()
    give_up = asked + g.o.settings.epoch_overlap_s + RECORD_SLACK_S + FINAL_COMMIT_S
    while time.monotonic() < give_up:
        values = g.r.mget(keys)
        if not any(v is not None and text(v) in holders for v in values):
            return None
        # a live window ends within moments of the ask; a dead one's record lapses later
        waited = time.monotonic() - asked
        time.sleep(HANDOFF_POLL_S if waited < SLOW_POLL_AFTER_S else SLOW_POLL_S)
    raise TimeoutError(f"{g.operator}: windows {holders} did not end or lapse in time")


def serve(
    g: GroupRun,
    slots: tuple[Slot, ...],
    records: dict[int, list[Any]],
    task: tuple[float, float, int, float],
    stop: Callable[[], bool],
    moves_in_task: bool,
    entry: EntryTask | None,
    lane: int,
    key: tuple,
    holder: str | None,
) -> list[SlotRow]:
    """A fresh window (``task``: its deadline, the wall time it began, the backlog read,
    and how long the window may outlive it) in a consumer ``lane`` of its own."""
    deadline, began_at, backlog, overlap_s = task
    window = Window(g, slots, key, lane, holder)
    window.stop = stop
    window.span.deadline = deadline + overlap_s

    def run(ends: Callable[[], bool]) -> list[SlotResult]:
        return run_windowed(g, slots, records, window.span, ends, moves_in_task, entry, lane)

    try:
        window.start(run, began_at, backlog)
    except BaseException:
        free_lane(g.o, g.topic, lane)
        raise
    return window.wait(deadline, overlap_s)
