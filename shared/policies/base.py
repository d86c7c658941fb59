"""The Analyze interface every elasticity policy implements.

A policy sees one interval's statistics and says, per operator, how many active replicas
the next interval needs. Planning (pool bounds, the global budget) is shared: see
``elastic_sps.control.plan``. The simulator and the analyze service call the very same objects.
"""

from __future__ import annotations

from typing import Protocol

from elastic_sps.model.analysis import Analysis, OperatorDecision
from elastic_sps.model.interval_stats import IntervalStats

__all__ = ["Analysis", "OperatorDecision", "Policy", "PolicyConfigError"]


class PolicyConfigError(ValueError):
    """A policy parameter out of range; the message names it."""


class Policy(Protocol):
    name: str

    def analyze(self, stats: IntervalStats) -> Analysis: ...
