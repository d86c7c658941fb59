"""sps.metrics: per operator and interval, the counters the dataplane publishes.

``operator`` "source" carries λ_G (events that entered) in ``processed``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from elastic_sps.contracts.base import Record


class OperatorCounters(Record):
    schema_name: Literal["sps.metrics"] = "sps.metrics"
    version: Literal[1] = 1
    interval: int = Field(ge=0)
    operator: str = Field(min_length=1)
    replica: int = Field(default=0, ge=0)
    received_from: dict[str, float] = Field(default_factory=dict)
    processed: float = Field(default=0.0, ge=0)
    emitted: float = Field(default=0.0, ge=0)
    # per successor, counted as they are sent: PA-SPS Eq. 6's λ_i^p in the same batches
    # as the sender's μ_p (elastic_sps.model.pa_sps_model.edge_thetas)
    emitted_to: dict[str, float] = Field(default_factory=dict)
    queued: float | None = Field(default=None, ge=0)  # latest per replica; None: not reported
    busy_s: float = Field(default=0.0, ge=0)
    dead_lettered: float = Field(default=0.0, ge=0)
    # a chain's members after its head: their own failed inputs, dead-lettered while the
    # event that entered the chain counts as processed (so apart from its fates)
    members_dead_lettered: float = Field(default=0.0, ge=0)
    # of the events it processed, those one of whose members failed: not all of their
    # outputs left the chain (a sink chain's events that did not complete)
    incomplete: float = Field(default=0.0, ge=0)
    expired: float = Field(default=0.0, ge=0)  # waited longer than t_out: not processed
    shed: float = Field(default=0.0, ge=0)  # ingress: events dropped by the shedder
    unkeyed: float = Field(default=0.0, ge=0)  # ingress: admitted without the key attribute
    active_replicas: int = Field(default=1, ge=0)
    # Samples (uniform over the batch) for percentiles; the sums and counts give exact means.
    latency_ms: list[float] = Field(default_factory=list)  # end to end, at sinks
    queuing_ms: list[float] = Field(default_factory=list)  # admitted -> processing, entry ops
    latency_ms_sum: float = Field(default=0.0, ge=0)
    latency_n: int = Field(default=0, ge=0)
    queuing_ms_sum: float = Field(default=0.0, ge=0)
    queuing_n: int = Field(default=0, ge=0)

    @classmethod
    def arrivals(cls, interval: int, counts: dict[str, int]) -> OperatorCounters:
        """An interval's arrivals as the monitor reads λ_G: operator ``source``'s row
        (``received``, ``shed`` and ``unkeyed`` counted by the admitting reader)."""
        return cls(
            interval=interval,
            operator="source",
            processed=counts.get("received", 0),
            shed=counts.get("shed", 0),
            unkeyed=counts.get("unkeyed", 0),
        )
