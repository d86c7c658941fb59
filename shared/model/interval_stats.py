"""Per-interval statistics of the PA-SPS model (§3.2, Table 1): the Monitor's output.

The simulator builds these directly; the monitor service builds them from the counters the
dataplane publishes. Counts are events within one interval of length ``td`` seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class OperatorStats:
    received: float  # λ_i^r(t)
    processed: float  # μ_i(t)
    queued: float  # |q_i(t)| at the end of the interval
    received_from: Mapping[str, float] = field(default_factory=dict)  # λ_i^p(t), per predecessor
    emitted: float = 0.0  # events sent to all successors
    emitted_to: Mapping[str, float] = field(default_factory=dict)  # per successor, as sent
    active_replicas: int = 1
    et_s: float = 0.0  # measured mean execution time per event (0: nothing processed)
    busy_s: float = 0.0  # summed busy time of the replicas
    expired: float = 0.0  # not processed: older than t_out, or refused by a full queue


@dataclass(frozen=True)
class IntervalStats:
    index: int
    td: float
    input_events: float  # λ_G(t)
    operators: Mapping[str, OperatorStats]
    latency_ms: float | None = None
    shed_events: float = 0.0  # of λ_G(t), dropped at ingress (counted by arrival time too)
