"""Online predictor selection for PA-SPS: a UCB bandit over the predictors.

PA-SPS leaves the predictor to the operator. Its authors later added a bandit
(adaptive-sps-storm, ``internal/predictive/mab.go``): each decision window one predictor
(arm) sizes the pools; at the window's end the arm is rewarded from what the run measured,

    reward = w_lat (1 − lat_n) + w_deg (1 − deg_n) + w_sav sav_n,

each term normalised to [0, 1] by fixed bounds, and its value Q updated by an exponential
moving average; the next arm maximises Q + c √(ln T / (N + 1)). We follow the authors'
newest version (commit 49651d8, November 2025): degradation normalised against 0.10 (their
example SLA), no cooldown (an arm may change every window), no cold-start round (the
bonus of an untried arm does the exploring), saved = (baseline − replicas) / baseline,
which with the pool as the baseline is the paper's saved resources. Their earlier version
(0.25, a 2-window cooldown, a cold start, replicas / pool as the "saving") is
``UCB(cooldown=2, cold_start=True)`` with ``RewardBounds(degradation=(0, 0.25))``.
Where we differ:

* UCB rather than Thompson sampling: deterministic (the simulator and the services make
  the same choices on the same trace, tests can state them), no prior to choose for a
  reward that is not Bernoulli, and it is what the authors wrote; its EMA value tracks a
  trace whose best predictor changes (a spike, then calm).
* latency normalised against the user's goal (0 at no latency, 1 at the goal or above)
  instead of the authors' fixed 50-500 ms;
* saved resources over the whole pool (the authors' ``baseline_replicas`` setting, which
  falls back to the current total, making the saving 0, when unset).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RewardWeights:
    latency: float = 0.34
    degradation: float = 0.33
    saving: float = 0.33


@dataclass(frozen=True)
class RewardBounds:
    """What maps to 0 and 1 in each normalised term (``mab.go``'s ``NormBounds``)."""

    latency_ms: tuple[float, float] = (0.0, 5_000.0)
    degradation: tuple[float, float] = (0.0, 0.10)
    saving: tuple[float, float] = (0.0, 0.5)

    @classmethod
    def for_goal(cls, goal_ms: float | None) -> RewardBounds:
        """The authors' bounds with latency normalised against a goal (None: 5 s)."""
        return cls(latency_ms=(0.0, goal_ms)) if goal_ms else cls()


def _norm(x: float, bounds: tuple[float, float]) -> float:
    lo, hi = bounds
    return 0.0 if hi <= lo else min(1.0, max(0.0, (x - lo) / (hi - lo)))


def reward(
    latency_ms: float,
    degradation: float,
    saving: float,
    weights: RewardWeights = RewardWeights(),
    bounds: RewardBounds = RewardBounds(),
) -> float:
    """One window's reward in [0, 1]: low latency, low degradation, high saving."""
    return (
        weights.latency * (1 - _norm(latency_ms, bounds.latency_ms))
        + weights.degradation * (1 - _norm(degradation, bounds.degradation))
        + weights.saving * _norm(saving, bounds.saving)
    )


@dataclass
class UCB:
    """The selector: ``choose()`` at each window's start, ``update(r)`` at its end."""

    arms: tuple[str, ...]
    c: float = 2.0
    alpha: float = 0.1  # EMA step of an arm's value
    cooldown: int = 0  # windows an arm is kept once chosen (0, 1: switch every window)
    cold_start: bool = False  # try every arm once before scoring
    q: dict[str, float] = field(default_factory=dict)
    n: dict[str, int] = field(default_factory=dict)
    t: int = 0
    current: str | None = None
    _kept: int = 0

    def __post_init__(self) -> None:
        if not self.arms:
            raise ValueError("a bandit needs at least one arm")
        for a in self.arms:
            self.q.setdefault(a, 0.0)
            self.n.setdefault(a, 0)

    def score(self, arm: str) -> float:
        return self.q[arm] + self.c * math.sqrt(math.log(max(1, self.t)) / (self.n[arm] + 1))

    def choose(self) -> str:
        if self.current is not None and self._kept < self.cooldown:
            self._kept += 1
            return self.current
        untried = [a for a in self.arms if self.n[a] == 0] if self.cold_start else []
        self.t += 1
        # cold start (if on): every arm once; then the best score (the first arm on a tie)
        self.current = untried[0] if untried else max(self.arms, key=self.score)
        self._kept = 1
        return self.current

    def update(self, r: float) -> None:
        """Credit the current arm with one window's reward."""
        if self.current is None:
            raise RuntimeError("update before any choice")
        arm = self.current
        # the first reward is the value itself: an EMA from 0 would punish the first arms
        self.q[arm] = r if self.n[arm] == 0 else (1 - self.alpha) * self.q[arm] + self.alpha * r
        self.n[arm] += 1
