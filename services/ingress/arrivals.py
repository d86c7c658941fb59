"""λ_G(t) as PA-SPS means it: the events that *arrived* in interval t.

Counting by when a batch was handled made the monitor's input rate alternate between 0
and thousands of events/s (the ingress takes up to 5,000 records a call), and the
predictors flapped on it. Each record's Kafka timestamp is its arrival (the producer's
send time), so counts are kept per arrival interval and published once the interval is
past plus a short grace; a record that arrives later still is published under its own
interval and the monitor folds it in as late.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE


def arrival_s(msg: object, fallback: float) -> float:
    """The record's timestamp in epoch seconds (``fallback`` when it carries none)."""
    kind, ms = msg.timestamp()  # type: ignore[attr-defined]
    return fallback if kind == TIMESTAMP_NOT_AVAILABLE or ms <= 0 else ms / 1000.0


@dataclass
class ArrivalCounts:
    td: float
    grace_s: float = 0.25
    open: dict[int, dict[str, int]] = field(default_factory=lambda: defaultdict(dict))

    def add(self, at_s: float, what: str, n: int = 1) -> None:
        counts = self.open[int(at_s // self.td)]
        counts[what] = counts.get(what, 0) + n

    def due(self, now: float) -> list[tuple[int, dict[str, int]]]:
        """The intervals whose end plus grace has passed, oldest first; removed."""
        ready = sorted(k for k in self.open if (k + 1) * self.td + self.grace_s <= now)
        return [(k, self.open.pop(k)) for k in ready]
