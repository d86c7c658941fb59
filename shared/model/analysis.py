"""What a policy's analysis says for the next interval: per operator, the replicas it
needs and what that was computed from (``elastic_sps.policies.base.Policy`` returns it; the
plan and the stabiliser take it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


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
