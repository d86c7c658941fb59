"""Online predictor selection with full information: follow the recently most accurate.

Every predictor forecasts every interval (they all observe the same input stream), so the
next interval tells how far *each* was off — not only the chosen one, as a bandit's
reward does. Selection is then a full-information problem, where following the leader
over a sliding window has small regret against the best fixed predictor without the
exploration a bandit pays for (it tried each arm in turn, and a poor arm sized the pools
for whole windows). Two choices make it a controller's selector:

* the loss is the forecast's absolute error in events, which is what Eq. 2 turns into
  replicas (too high: replicas held for nothing; too low: a queue Eq. 7 catches up on
  later), averaged over the last ``window`` intervals so that a trace whose best
  predictor changes (a spike, then calm) is followed;
* a switch needs the leader's windowed error to be below the current predictor's by a
  share ``margin``: two predictors that are about as good would otherwise alternate, and
  every switch can move the replica counts.

The constants are round values chosen from what they mean (a minute of intervals at
td = 1 s; a tenth better), not fitted to a trace; ``benchmarks/bench_control.py`` reports
the regret against the best predictor in hindsight on traces they were not chosen on.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass
class ErrorLeader:
    """``record`` the forecasts made for an interval and what arrived, ``choose`` the next."""

    arms: tuple[str, ...]
    window: int = 60
    margin: float = 0.1
    current: str = ""  # the predictor in use ("": the first listed)
    errors: dict[str, deque[float]] = field(init=False)

    def __post_init__(self) -> None:
        if not self.arms:
            raise ValueError("selection needs at least one predictor")
        if self.window < 1 or not 0 <= self.margin < 1:
            raise ValueError("window must be >= 1 and margin in [0, 1)")
        self.current = self.current or self.arms[0]
        self.errors = {a: deque(maxlen=self.window) for a in self.arms}

    def record(self, forecasts: Mapping[str, float], actual: float) -> None:
        for arm, f in forecasts.items():
            self.errors[arm].append(abs(f - actual))

    def mean_error(self, arm: str) -> float:
        e = self.errors[arm]
        return sum(e) / len(e) if e else 0.0

    def choose(self) -> str:
        """The leader if it beats the current predictor by ``margin``; else the current."""
        leader = min(self.arms, key=self.mean_error)  # the first listed on a tie
        if self.mean_error(leader) < (1 - self.margin) * self.mean_error(self.current):
            self.current = leader
        return self.current
