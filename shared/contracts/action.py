"""sps.actions: what execute did, and sps.deadletter: what a service could not take."""

from __future__ import annotations

from typing import Literal

from shared.contracts.base import Record


class ActionRecord(Record):
    schema_name: Literal["sps.action"] = "sps.action"
    version: Literal[1] = 1
    plan_id: str
    status: Literal["applied", "duplicate", "stale", "dry-run"]
    previous: dict[str, int]
    targets: dict[str, int]
    applied_at: float
    plan_latency_s: float | None = None


class DeadLetter(Record):
    schema_name: Literal["sps.deadletter"] = "sps.deadletter"
    version: Literal[1] = 1
    service: str
    topic: str
    partition: int | None = None
    offset: int | None = None
    reason: str  # for a user's operator: "<exception type>: <message>"
    payload: str  # the first 2,000 characters of what arrived
    error_type: str | None = None  # the exception's type, when an operator raised
    traceback: str | None = None  # its last frames, innermost last
    event_id: str | None = None
    at: float
