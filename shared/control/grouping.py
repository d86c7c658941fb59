"""Load-aware grouping (PA-SPS §3.1.2, Eq. 1 and Algorithm 1).

The router holds the utilisation U_{i,j} of each *active* replica of one operator,
refreshed once per interval from the monitor's figures, and sends each event to the least
utilised replica, charging it et_i / td; when even the least loaded is saturated (U = 1)
it falls back to round-robin.
"""

from __future__ import annotations

from collections.abc import Sequence


def utilisation(processed: float, et_s: float, td: float) -> float:
    """Eq. 1: U_{i,j}(t) = μ_{i,j}(t) × et_i / td."""
    return processed * et_s / td


def backlog_utilisation(backlog: Sequence[float], et_s: float, td: float) -> list[float]:
    """U_{i,j} from the work waiting at each replica: backlog_j × et_i / td (Eq. 1 with the
    queued events in place of the processed ones; README, deviations). A replica's
    last-batch utilisation is 0 or 1 in a micro-batch engine, and every upstream task
    routing on that one snapshot sent all its events to the same idle replica."""
    return [b * et_s / td for b in backlog]


# How often a router re-reads its successor's active count and backlog (the ingress's,
# and a dataplane task's for all its slots): a task's window is 0.6 s or more, and a
# scale-out must reach the routers well within it.
ROUTING_REFRESH_S = 0.2


class LoadAwareRouter:
    """``concurrency``: how many routers choose at once from the same snapshot (the
    upstream operator's active replicas). Each charges ``concurrency`` × et/td per
    event, as if the others made the same choice, so together they fill the least
    loaded replica only up to the others' level instead of ``concurrency`` times past it.
    ``start``: where the round-robin fallback starts (spread it between routers)."""

    def __init__(
        self,
        et_s: float,
        td: float,
        utilisations: Sequence[float],
        concurrency: int = 1,
        start: int = 0,
    ) -> None:
        if not utilisations:
            raise ValueError("load-aware grouping needs at least one active replica")
        self.step = max(1, concurrency) * et_s / td
        self.u = [min(1.0, max(0.0, float(x))) for x in utilisations]
        self._rr = start % len(self.u)

    def refresh(self, utilisations: Sequence[float]) -> None:
        """New interval, new figures; the replica count may have changed."""
        if not utilisations:
            raise ValueError("load-aware grouping needs at least one active replica")
        self.u = [min(1.0, max(0.0, float(x))) for x in utilisations]
        self._rr %= len(self.u)

    def choose(self) -> int:
        """Algorithm 1: the index (0-based) of the replica that gets the next event."""
        u = self.u
        m = 0
        for j in range(1, len(u)):  # lines 2-6: first replica of minimum utilisation
            if u[j] < u[m]:
                m = j
        if u[m] >= 1.0:  # lines 7-8: everybody is saturated
            m = self._rr
            self._rr = (self._rr + 1) % len(u)
        else:  # line 10
            u[m] = min(1.0, u[m] + self.step)
        return m
