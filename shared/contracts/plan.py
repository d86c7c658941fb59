"""sps.plans: what execute must apply, once (idempotent by ``plan_id``); and
sps.requests: on-demand rescale requests from ``elastic-sps rescale``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from elastic_sps.contracts.base import Record


class PlanRecord(Record):
    schema_name: Literal["sps.plan"] = "sps.plan"
    version: Literal[1] = 1
    plan_id: str = Field(min_length=1)
    interval: int = Field(ge=0)
    targets: dict[str, int]
    changes: dict[str, int] = Field(default_factory=dict)
    budget_bound: bool = False
    limited: dict[str, str] = Field(default_factory=dict)  # operator -> rule that limited it
    closed_at: float  # when the interval behind this plan closed (for plan latency)
    decided_at: float = 0.0  # when the plan service made it (the rescale timeline); 0: unknown
    short: list[str] = Field(default_factory=list)  # needs beyond the pool or budget


class RescaleRequest(Record):
    schema_name: Literal["sps.rescale"] = "sps.rescale"
    version: Literal[1] = 1
    request_id: str = Field(min_length=1)
    operator: str | None = None
    replicas: int | None = Field(default=None, ge=0)
    add: int | None = Field(default=None, ge=1)
    remove: int | None = Field(default=None, ge=1)
    input_eps: float | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _one_action(self) -> RescaleRequest:
        given = [x for x in (self.replicas, self.add, self.remove) if x is not None]
        if len(given) != 1:
            raise ValueError("exactly one of replicas, add, remove")
        if self.replicas is not None and self.operator is None:
            raise ValueError("replicas needs an operator")
        return self
