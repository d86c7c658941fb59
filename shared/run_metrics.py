"""The PA-SPS evaluation metrics (§4.1.3) computed from a run's time series."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from shared.simulator import Series
    from shared.topology import Topology


@dataclass(frozen=True)
class RunMetrics:
    saved_resources: float  # 1 - r / r_over, r_over = the whole pool
    throughput_degradation: float  # mean over intervals of |in - out| / in
    processed_ratio: float  # Σ processed / Σ received, all operators
    latency_ms: float  # mean end-to-end latency per event reaching a sink
    error_input: float  # MAPE of λ̂_G(t+1) against λ_G(t+1)
    error_replica: float  # MAPE of planned total replicas against what the load needed
    replicas_mean: float
    replicas_max: int
    reconfigurations: int  # operator-intervals whose replica count changed
    replica_changes: int  # Σ |Δr|
    intervals: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def mape(actual: np.ndarray, predicted: np.ndarray) -> float:
    mask = actual > 0
    if not mask.any():
        return 0.0
    return float(np.mean(np.abs(actual[mask] - predicted[mask]) / actual[mask]))


def summarise(topo: Topology, s: Series) -> RunMetrics:
    total = s.total_replicas()
    recv = np.asarray(s.received)
    proc = np.asarray(s.processed)
    busy = recv > 0
    degradation = (
        float(np.mean(np.abs(recv[busy] - proc[busy]) / recv[busy])) if busy.any() else 0.0
    )
    sink = np.asarray(s.sink_processed)
    lat = np.asarray(s.latency_ms)
    latency = float((lat * sink).sum() / sink.sum()) if sink.sum() > 0 else 0.0
    # The plan made at t is for t+1: compare planned[t] with needed[t+1].
    planned = np.asarray(s.planned[:-1], dtype=float)
    needed = np.asarray(s.needed[1:], dtype=float)
    per_op = np.array([np.asarray(v) for v in s.replicas.values()])
    deltas = np.abs(np.diff(per_op, axis=1)) if per_op.shape[1] > 1 else np.zeros((1, 0))
    return RunMetrics(
        saved_resources=float(1.0 - total.mean() / topo.pool_total),
        throughput_degradation=degradation,
        processed_ratio=float(proc.sum() / recv.sum()) if recv.sum() > 0 else 1.0,
        latency_ms=latency,
        error_input=mape(np.asarray(s.input_events), np.asarray(s.predicted_input)),
        error_replica=mape(needed, planned),
        replicas_mean=float(total.mean()),
        replicas_max=int(total.max()),
        reconfigurations=int((deltas > 0).sum()),
        replica_changes=int(deltas.sum()),
        intervals=len(s.input_events),
    )
