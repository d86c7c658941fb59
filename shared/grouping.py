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


class LoadAwareRouter:
    def __init__(self, et_s: float, td: float, utilisations: Sequence[float]) -> None:
        if not utilisations:
            raise ValueError("load-aware grouping needs at least one active replica")
        self.step = et_s / td
        self.u = [min(1.0, max(0.0, float(x))) for x in utilisations]
        self._rr = 0

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
