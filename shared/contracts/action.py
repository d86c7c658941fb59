"""sps.actions: what execute did, and sps.deadletter: what a service could not take."""

from __future__ import annotations

import time
from typing import Literal

from elastic_sps.contracts.base import Record


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

    @classmethod
    def of(
        cls,
        service: str,
        topic: str,
        raw: bytes | None,
        reason: str,
        *,
        partition: int | None = None,
        offset: int | None = None,
        error_type: str | None = None,
        traceback: str | None = None,
        event_id: str | None = None,
        at: float | None = None,
    ) -> DeadLetter:
        """The dead letter of ``raw`` (its first ``PAYLOAD_KEPT`` bytes, as text)."""
        return cls(
            service=service,
            topic=topic,
            partition=partition,
            offset=offset,
            reason=reason,
            payload=bytes(raw or b"")[:PAYLOAD_KEPT].decode("utf-8", "replace"),
            error_type=error_type,
            traceback=traceback,
            event_id=event_id,
            at=time.time() if at is None else at,
        )

    def encoded(self) -> bytes:
        return self.model_dump_json().encode()


PAYLOAD_KEPT = 2000
