"""sps.stats: one record per closed interval, the PA-SPS model's statistics."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from elastic_sps.contracts.base import Record
from elastic_sps.model.interval_stats import IntervalStats, OperatorStats


class OperatorInterval(BaseModel):
    received: float = 0.0
    received_from: dict[str, float] = Field(default_factory=dict)
    processed: float = 0.0
    emitted: float = 0.0
    emitted_to: dict[str, float] = Field(default_factory=dict)  # per successor, as sent
    queued: float = 0.0
    busy_s: float = 0.0
    et_ms: float = 0.0  # measured: busy time per processed event
    expired: float = 0.0  # waited longer than t_out at this operator
    active_replicas: int = 0
    silent: bool = False  # sent nothing this interval


class StatsRecord(Record):
    schema_name: Literal["sps.stats"] = "sps.stats"
    version: Literal[1] = 1
    interval: int = Field(ge=0)
    td: float = Field(gt=0)
    input_events: float = Field(ge=0)
    operators: dict[str, OperatorInterval]
    latency_ms_mean: float | None = None
    latency_ms_p99: float | None = None
    queuing_ms_mean: float | None = None  # admitted at ingress -> processing at entry ops
    shed_events: float = 0.0
    late_records: int = 0
    closed_at: float  # epoch seconds when the interval closed

    def to_interval_stats(self) -> IntervalStats:
        ops = {
            n: OperatorStats(
                received=o.received,
                processed=o.processed,
                queued=o.queued,
                received_from=dict(o.received_from),
                emitted=o.emitted,
                emitted_to=dict(o.emitted_to),
                active_replicas=o.active_replicas,
                et_s=o.et_ms / 1000.0,
                busy_s=o.busy_s,
            )
            for n, o in self.operators.items()
        }
        return IntervalStats(
            self.interval, self.td, self.input_events, ops, self.latency_ms_mean, self.shed_events
        )
