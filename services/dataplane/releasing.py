"""A replica's releases of the partitions that leave it inside an epoch
(``handover``), handed on off the replica's thread."""

from __future__ import annotations

import threading
from collections.abc import Callable

from elastic_sps.services.dataplane.group import GroupRun
from elastic_sps.services.dataplane.handover import HandOver
from elastic_sps.services.dataplane.publishing import publish
from elastic_sps.services.dataplane.steps import SlotResult, SlotRun


class Releases:
    """A replica's releases, each handed on from a thread of its own: the thread flushes
    the producer, commits what the leaving partitions did and frees them, while the
    replica serves the partitions that stay (a flush waits a broker round trip). A
    release that fails frees nothing and fails the replica at its next ``check``."""

    def __init__(self, g: GroupRun) -> None:
        self.g = g
        self.pending: list[threading.Thread] = []
        self.error: BaseException | None = None
        # wakes the replica's take (its feed's ``WAKE``): a failed release fails it now,
        # not at its next checkpoint
        self.wake: Callable[[], None] = lambda: None

    def start(self, leaving: list[tuple[HandOver, SlotRun]], results: list[SlotResult]) -> None:
        """From the replica's thread: what it staged goes to the client first, and the
        failures it has not yet raised count against the release's flush."""
        since = self.g.producer.seen()
        self.g.producer.send()
        args = (leaving, results, since)
        thread = threading.Thread(target=self._hand_on, args=args, name="sps-release")
        thread.start()
        self.pending.append(thread)

    def _hand_on(
        self, leaving: list[tuple[HandOver, SlotRun]], results: list[SlotResult], since: int
    ) -> None:
        try:
            self.g.producer.flush(since=since)
            publish(self.g, results)
        except BaseException as exc:  # raised in the replica's thread (``check``)
            self.error = self.error or exc
            self.wake()
            return
        for (move, run), res in zip(leaving, results, strict=True):
            if run.keyed is not None and run.keyed.fenced:
                continue  # not this attempt's to hand on: the next task starts from the commit
            move.released(res.next_offset)

    def check(self) -> None:
        """Raise a release's failure, once every release has ended: none commits after
        the replica's task has failed (its retry plans from the commits)."""
        if self.error is not None:
            self.join()
            raise self.error

    def join(self) -> None:
        """Every release ended, handed on or failed (a replica that fails waits here)."""
        for thread in self.pending:
            thread.join()
        self.pending.clear()

    def settle(self) -> None:
        """Every release handed on, or the first failure raised."""
        self.join()
        self.check()
