"""A uniform sample of a batch's latencies plus their exact sum and count.

Keeping the first N values would sample only the oldest events of a micro-batch (the ones
that waited longest) and overstate the mean; reservoir sampling (Vitter's Algorithm R)
keeps every event equally likely to be in the sample, and the sum gives the exact mean.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class LatencySample:
    capacity: int
    values: list[float] = field(default_factory=list)
    total: float = 0.0
    n: int = 0
    rng: random.Random = field(default_factory=lambda: random.Random(0))

    def add(self, value: float) -> None:
        value = max(0.0, value)  # clocks of two processes: never report a negative wait
        self.total += value
        self.n += 1
        if len(self.values) < self.capacity:
            self.values.append(value)
        else:
            j = self.rng.randrange(self.n)
            if j < self.capacity:
                self.values[j] = value
