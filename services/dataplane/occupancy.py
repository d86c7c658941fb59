"""A replica's cost clock.

Operator cost comes in two modes (``cost_mode``), beside ``none`` (the operator's own
work only):

* ``wait``: the replica is occupied ``et_ms`` per event, as an operator bound by a remote
  call (an enrichment lookup, a database write, a model server) is. It sleeps the rest
  of ``et_ms`` after its real work, so its capacity is 1/et per replica on any machine:
  what the embedded demo uses.
* ``cpu``: the operator's real work plus burned CPU up to ``et_ms``, for clusters with a
  core per task slot.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


def _spin(seconds: float) -> None:
    """``cpu`` cost: burn the core like a real operator would (sleep would free it)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@dataclass
class Occupancy:
    """A replica's clock in ``wait``/``cpu`` mode over one micro-batch, whose events are
    all there when it starts: each event occupies the replica for max(et, real work).
    The clock runs ahead of the wall by what the replica owes; it sleeps only when ahead
    by > 2 ms, and an oversleep shortens the next sleep, so sleep granularity neither
    loses nor adds capacity."""

    mode: str
    et_s: float
    free_at: float = field(default_factory=time.perf_counter)

    def end(self, began: float, ended: float) -> float:
        """Account for one event whose work ran from ``began`` to ``ended``
        (perf_counter); returns the time it occupied the replica."""
        work = ended - began
        if self.mode == "cpu" and self.et_s > work:
            _spin(self.et_s - work)
        occupied = max(self.et_s, work) if self.mode in ("wait", "cpu") else work
        self.free_at += occupied  # the batch's events are all waiting: no idle gaps
        if self.mode == "wait":
            ahead = self.free_at - ended
            if ahead > 0.002:
                time.sleep(ahead)
        return occupied

    def arrive(self, at: float) -> None:
        """An event that arrived at ``at`` (perf_counter) while the task ran: a replica
        idle before it owes nothing for the gap."""
        self.free_at = max(self.free_at, at)

    def settle(self) -> None:
        """The batch ends when the replica has served its last event's time."""
        ahead = self.free_at - time.perf_counter()
        if self.mode == "wait" and ahead > 0:
            time.sleep(ahead)
