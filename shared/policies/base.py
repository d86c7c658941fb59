"""The Analyze interface every elasticity policy implements.

A policy sees one interval's statistics and says, per operator, how many active replicas
the next interval needs. Planning (pool bounds, the global budget) is shared: see
``shared.control.plan``. The simulator and the analyze service call the very same objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from shared.model.interval_stats import IntervalStats


class PolicyConfigError(ValueError):
    """A policy parameter out of range; the message names it."""


@dataclass(frozen=True)
class OperatorDecision:
    replicas: int  # needed active replicas for t+1, within [min, pool]
    predicted_load: float = 0.0  # λ̂_i(t+1): events the operator should process in t+1
    raw_replicas: float = 0.0  # before rounding and bounds
    # what the decision was made from and the rule that made it, for `explain`
    inputs: Mapping[str, float] = field(default_factory=dict)
    rule: str = ""


@dataclass(frozen=True)
class Analysis:
    interval: int
    predicted_input: float  # λ̂_G(t+1), events in the next interval
    operators: Mapping[str, OperatorDecision]

    def replicas(self) -> dict[str, int]:
        return {n: d.replicas for n, d in self.operators.items()}


class Policy(Protocol):
    name: str

    def analyze(self, stats: IntervalStats) -> Analysis: ...
