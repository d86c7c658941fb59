"""λ_G(t) as PA-SPS means it: the events that *arrived* in interval t.

Counting by when a batch was handled made the monitor's input rate alternate between 0
and thousands of events/s (the ingress takes up to 5,000 records a call), and the
predictors flapped on it. Each record's Kafka timestamp is its arrival (the producer's
send time), so counts are kept per arrival interval and published once the interval is
past plus a short grace *and* the ingress has read everything sent before then (a
``consume`` that came back short: nothing was left waiting), or, whatever it has read,
``max_wait_s`` after the interval's end (the monitor closes it soon after by the wall
clock). A record that arrives later still is published under its own interval and the
monitor folds it in as late. Publishing on the clock alone, an ingress that lagged its
topic by a poll (a loaded 2-core machine: ~1 s) counted half of every interval late:
λ_G read 504, 50, 512, 56 where the replay sent ~560 each second (error 0.81).
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
    grace_s: float = 0.15
    max_wait_s: float = 1.5
    open: dict[int, dict[str, int]] = field(default_factory=lambda: defaultdict(dict))
    read_up_to: float = 0.0  # every record sent before this time (epoch s) has been read

    def caught_up(self, at: float) -> None:
        """A read that began at ``at`` left nothing waiting."""
        self.read_up_to = max(self.read_up_to, at)

    def add(self, at_s: float, what: str, n: int = 1) -> None:
        counts = self.open[int(at_s // self.td)]
        counts[what] = counts.get(what, 0) + n

    def due(self, now: float) -> list[tuple[int, dict[str, int]]]:
        """The intervals read to their end plus grace, or ended ``max_wait_s`` ago, oldest
        first; removed."""
        ready = sorted(
            k
            for k in self.open
            if (k + 1) * self.td + self.grace_s <= min(now, self.read_up_to)
            or (k + 1) * self.td + self.max_wait_s <= now
        )
        return [(k, self.open.pop(k)) for k in ready]
