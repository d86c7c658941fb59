"""sps.analysis: the policy's view of the next interval."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from elastic_sps.contracts.base import Record


class OperatorNeed(BaseModel):
    replicas: int = Field(ge=0)
    predicted_load: float = 0.0
    current: int = Field(ge=0)
    raw_replicas: float = 0.0  # before rounding and the pool's bounds
    inputs: dict[str, float] = Field(default_factory=dict)  # what the policy decided from
    rule: str = ""  # the policy's rule, in words
    # measured, whatever the policy: the plan's backlog rule (shared/control/stabilise.py)
    queued: float = Field(default=0.0, ge=0)
    et_s: float = Field(default=0.0, ge=0)


class AnalysisRecord(Record):
    schema_name: Literal["sps.analysis"] = "sps.analysis"
    version: Literal[1] = 1
    interval: int = Field(ge=0)
    td: float = Field(gt=0)
    policy: str
    predicted_input: float = Field(ge=0)
    observed_input: float = Field(ge=0)
    operators: dict[str, OperatorNeed]
    closed_at: float
