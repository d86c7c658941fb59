"""A replica's commits inside an epoch, handed on off the replica's thread: its
checkpoints and its releases of the partitions that leave it (``handover``), in the
order the replica made them, each once the outputs before it are delivered."""

from __future__ import annotations

import threading
from collections.abc import Callable

from elastic_sps.io.id_ledger import IdBatch
from elastic_sps.io.tracked_producer import Mark
from elastic_sps.services.dataplane.group import GroupRun
from elastic_sps.services.dataplane.handover import HandOver
from elastic_sps.services.dataplane.publishing import publish
from elastic_sps.services.dataplane.steps import SlotResult, SlotRun


class Commits:
    """A replica's commits, each on a thread of its own that first waits for the one
    before: the thread waits for the records the replica had handed to the producer
    (``TrackedProducer.mark``: a broker round trip), then publishes and commits what
    the replica did up to then, while the replica serves on. A commit that fails
    commits nothing after it and fails the replica at its next ``check``."""

    def __init__(self, g: GroupRun) -> None:
        self.g = g
        self.pending: list[threading.Thread] = []
        self.error: BaseException | None = None
        # wakes the replica's take (its feed's ``WAKE``): a failed commit fails it now,
        # not at its next checkpoint
        self.wake: Callable[[], None] = lambda: None

    def busy(self) -> bool:
        """Whether a commit is still under way (a checkpoint due meanwhile waits)."""
        self.pending = [t for t in self.pending if t.is_alive()]
        return bool(self.pending)

    def checkpoint(self, cut: list[SlotResult]) -> None:
        """From the replica's thread, at the cut (``cut_results``)."""
        self._start(self._checkpoint, cut)

    def release(self, leaving: list[tuple[HandOver, SlotRun]], results: list[SlotResult]) -> None:
        """From the replica's thread, the leaving slots finished: what the leaving
        partitions did committed, then each freed for its new owner."""
        self._start(self._release, leaving, results)

    def _start(self, job: Callable[..., None], *args: object) -> None:
        # failures the replica has not yet raised count against the wait
        since, mark = self.g.producer.seen(), self.g.producer.mark()
        before = self.pending[-1] if self.pending else None
        thread = threading.Thread(
            target=self._run, args=(before, job, since, mark, *args), name="sps-commit"
        )
        thread.start()
        self.pending.append(thread)

    def _run(
        self,
        before: threading.Thread | None,
        job: Callable[..., None],
        since: int,
        mark: Mark,
        *args: object,
    ) -> None:
        if before is not None:
            before.join()
        if self.error is not None:
            return  # nothing commits after a failed commit
        try:
            self.g.producer.flush(since=since, until=mark)
            job(*args)
        except BaseException as exc:  # raised in the replica's thread (``check``)
            self.error = self.error or exc
            self.wake()

    def _checkpoint(self, cut: list[SlotResult]) -> None:
        publish(self.g, cut)

    def _release(self, leaving: list[tuple[HandOver, SlotRun]], results: list[SlotResult]) -> None:
        publish(self.g, results)
        for (move, run), res in zip(leaving, results, strict=True):
            if run.keyed is not None and run.keyed.fenced:
                continue  # not this attempt's to hand on: the next task starts from the commit
            move.released(res.next_offset)

    def check(self) -> None:
        """Raise a commit's failure, once every commit has ended: none commits after
        the replica's task has failed (its retry plans from the commits)."""
        if self.error is not None:
            self.join()
            raise self.error

    def join(self) -> None:
        """Every commit ended, applied or failed (a replica that fails waits here)."""
        for thread in self.pending:
            thread.join()
        self.pending.clear()

    def settle(self) -> None:
        """Every commit applied, or the first failure raised."""
        self.join()
        self.check()


def checkpoint(g: GroupRun, runs: list[SlotRun]) -> None:
    """A cut of ``runs`` committed on the caller's thread: its outputs flushed first,
    then what the slots did since the last checkpoint published and committed (a
    replica's checkpoints go through ``Commits``, off its thread)."""
    cut = cut_results(runs)
    if cut is not None:
        g.producer.flush()
        publish(g, cut)


def cut_results(runs: list[SlotRun]) -> list[SlotResult] | None:
    """What the slots did since their last cut (counters, progress, the partitions'
    watermarks, keyed writes taken off the store's buffers); None: nothing to commit.
    The slots go on from there."""
    cut = [cut_result(run) for run in runs]
    if not any(r.next_offset > r.start or r.keyed is not None for r in cut):
        return None
    for res in cut:
        if res.marks is not None:
            res.marks = res.marks.cut()
    return cut


def cut_result(run: SlotRun) -> SlotResult:
    """The slot's result so far; the slot goes on with a fresh one from its offset."""
    res = run.res
    if run.ctx is not None:
        run.ctx.writes.execute()  # the operator's writes before the offset they reflect
    if run.keyed is not None:
        res.keyed = run.keyed
        res.commit = run.keyed.due(res.start, res.next_offset)
    fresh = SlotResult(res.replica, ids=IdBatch(run.g.keys.prefix) if res.ids is not None else None)
    fresh.start = fresh.next_offset = res.next_offset
    fresh.marks = res.marks
    run.res = fresh
    return res
