"""sps.decisions: one record per operator and plan, saying why the count is what it is."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from elastic_sps.contracts.base import Record


class DecisionRecord(Record):
    schema_name: Literal["sps.decision"] = "sps.decision"
    version: Literal[1] = 1
    interval: int = Field(ge=0)
    operator: str
    policy: str
    current: int = Field(ge=0)  # active replicas when the interval closed
    asked: int = Field(ge=0)  # what the policy asked for (within the pool)
    raw: float = 0.0  # the policy's figure before rounding and the pool
    chosen: int = Field(ge=0)  # what the plan set
    rule: str = ""
    inputs: dict[str, float] = Field(default_factory=dict)
    # what held the count away from the policy's figure: "pool", "budget",
    # "scale-down window", "max step"; empty when nothing did
    limited_by: list[str] = Field(default_factory=list)
    pool: tuple[int, int]  # [min, max] replicas of the operator
    dry_run: bool = False  # logged only; execute changed nothing
    closed_at: float
