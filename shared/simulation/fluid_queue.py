"""One operator's FIFO queue in the fluid simulator: cohorts of events with their age.

A *cohort* is a fluid amount of events that entered the system together (``born``, the
mean entry time) and reached this operator at ``ready`` (mean). Keeping the entry time
is what lets the simulator apply PA-SPS's ``t_out`` (§4.1.4: an event older than t_out
is not processed: it expires) and measure end-to-end latency per completed event, and
keeping the ready time lets an operator serve its queue in FIFO order on a server clock
(``serve``) instead of Little's law over an interval's mean backlog, which had no
queueing below 100 % load (issue: faithful evaluation).

Below saturation an event still waits for busy replicas: the Sakasegawa (1977)
approximation of the G/G/c mean wait, W_q ≈ ρ^(√(2(c+1)) − 1) / (c (1 − ρ)) ·
(c_a² + c_s²)/2 · et, with Poisson arrivals (c_a² = 1) and the execution time's squared
coefficient of variation c_s². It is what penalises a plan that runs every replica at
100 %: the paper's latency-versus-resources trade-off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

RHO_CAP = 0.95  # beyond this the backlog (the server clock) carries the wait, not W_q
MAX_COHORTS = 256  # older neighbours are merged past this: bounded cost per interval


@dataclass
class Cohort:
    amount: float
    born: float  # mean time its events entered the system (s)
    ready: float  # mean time they reached this operator (s)


def gg_c_wait(rho: float, servers: int, et_s: float, cs2: float = 0.0) -> float:
    """Sakasegawa's approximation of the mean wait in a G/G/c queue (seconds)."""
    if rho <= 0 or servers <= 0:
        return 0.0
    rho = min(rho, RHO_CAP)
    power = math.sqrt(2.0 * (servers + 1)) - 1.0
    return rho**power / (servers * (1.0 - rho)) * (1.0 + cs2) / 2.0 * et_s


def coalesce(cohorts: list[Cohort], td: float) -> list[Cohort]:
    """Merge the cohorts born in the same interval of ``td`` into one, with the
    amount-weighted mean born and ready times: the latency sum Σ amount × (ready − born)
    is kept exactly, and t_out is judged on a born time within td of each event's. Without
    it, every join in a DAG multiplies the cohorts downstream (one per cohort served per
    predecessor), and a 100-operator DAG ran ~150 cohorts per operator and interval."""
    if len(cohorts) < 2:
        return cohorts
    groups: dict[int, list[float]] = {}
    for c in cohorts:
        g = groups.setdefault(int(c.born // td), [0.0, 0.0, 0.0])
        g[0] += c.amount
        g[1] += c.amount * c.born
        g[2] += c.amount * c.ready
    return [Cohort(n, b / n, r / n) for n, b, r in groups.values() if n > 0]


@dataclass
class Served:
    """What one operator did in one interval."""

    processed: list[Cohort] = field(default_factory=list)  # ready = completion time
    expired: float = 0.0
    dropped: float = 0.0


@dataclass
class OperatorQueue:
    """FIFO by ready time; ``clock`` is when the replicas finish what they started."""

    cohorts: list[Cohort] = field(default_factory=list)
    clock: float = 0.0

    @property
    def size(self) -> float:
        return sum(c.amount for c in self.cohorts)

    def add(self, cohorts: list[Cohort]) -> None:
        self.cohorts.extend(c for c in cohorts if c.amount > 0)
        self.cohorts.sort(key=lambda c: c.ready)
        if len(self.cohorts) > MAX_COHORTS:
            self._merge_oldest()

    def _merge_oldest(self) -> None:
        half = len(self.cohorts) // 2
        merged = []
        for a, b in zip(self.cohorts[:half:2], self.cohorts[1:half:2], strict=False):
            n = a.amount + b.amount
            merged.append(
                Cohort(n, (a.born * a.amount + b.born * b.amount) / n, max(a.ready, b.ready))
            )
        rest = self.cohorts[half:] if half % 2 == 0 else self.cohorts[half - 1 :]
        self.cohorts = merged + rest

    def serve(
        self,
        t0: float,
        td: float,
        rate: float,
        post_s: float,
        t_out_s: float | None = None,
    ) -> Served:
        """Serve the interval [t0, t0 + td) at ``rate`` events/s in FIFO order.

        A cohort not ready before the interval ends waits for the next one; a cohort
        older than ``t_out_s`` when its service would start expires without using any
        capacity (as the live replica checks an event's age before running it). The
        taken part of a cohort completes, on average, half its own service after its
        start, plus ``post_s`` (et, the G/G/c wait and the engine's hop)."""
        out = Served()
        t1 = t0 + td
        capacity = rate * td
        clock = max(self.clock, t0)
        left: list[Cohort] = []
        for c in self.cohorts:
            if c.ready >= t1 or capacity <= 1e-12:
                left.append(c)
                continue
            take = min(c.amount, capacity)
            # Arrivals spread over the interval: the server need not idle for their mean.
            start = max(clock, c.ready - take / (2.0 * rate))
            if t_out_s is not None and start - c.born > t_out_s:
                out.expired += c.amount
                continue
            clock = start + take / rate
            capacity -= take
            out.processed.append(Cohort(take, c.born, start + take / (2.0 * rate) + post_s))
            if take < c.amount:
                left.append(Cohort(c.amount - take, c.born, c.ready))
        self.cohorts = left
        self.clock = clock
        return out

    def drop_beyond(self, limit: float) -> float:
        """A full queue refuses the newest events (PA-SPS q_size): what was dropped."""
        excess = self.size - limit
        dropped = 0.0
        while excess > 1e-9 and self.cohorts:
            last = self.cohorts[-1]
            cut = min(last.amount, excess)
            last.amount -= cut
            excess -= cut
            dropped += cut
            if last.amount <= 1e-12:
                self.cohorts.pop()
        return dropped
