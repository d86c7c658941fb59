"""A uniform sample of a batch's latencies plus their exact sum and count.

Keeping the first N values would sample only the oldest events of a micro-batch (the ones
that waited longest) and overstate the mean; reservoir sampling keeps every event equally
likely to be in the sample, and the sum gives the exact mean. Li's Algorithm L draws how
many events to skip before the next one kept, so an event not kept costs a comparison, not
a random draw (Algorithm R's per event).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field


@dataclass
class LatencySample:
    capacity: int
    values: list[float] = field(default_factory=list)
    total: float = 0.0
    n: int = 0
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    _w: float = 1.0  # Algorithm L's running weight
    _next: int = 0  # the count at which the next event is kept, once full

    def add(self, value: float) -> None:
        if not value >= 0.0:  # clocks of two processes: never a negative wait (nor NaN)
            value = 0.0
        self.total += value
        self.n += 1
        if self.n < self._next:
            return
        if len(self.values) < self.capacity:
            self.values.append(value)
            if len(self.values) == self.capacity:
                self._skip()
            return
        # random() scaled, not randrange: a third of its cost, on the per-event path
        self.values[int(self.rng.random() * self.capacity)] = value
        self._skip()

    def _skip(self) -> None:
        """Draw the count of the next event kept (Li 1994, Algorithm L)."""
        self._w *= math.exp(math.log(1.0 - self.rng.random()) / self.capacity)
        gap = math.log(1.0 - self.rng.random()) / math.log1p(-self._w) if self._w < 1 else 0
        self._next = self.n + int(gap) + 1
