"""The PA-SPS evaluation metrics (§4.1.3), one definition for the simulator and the live
report. In the paper's words, and how each is computed here from per-interval series:

* *Saved resources*, "1 − r / r_over, with r the number of active replicas, and r_over
  the overestimated number of replicas": r is the mean total of active replicas over the
  trace's intervals, r_over the whole pool.
* *Throughput degradation*, "|input_rate − output_rate| / input_rate": per interval at
  the system's edges, input = events entering, output = events completed at the sinks
  (normalised by the topology's expected sink fraction, so in input events), averaged
  over the intervals with input. A sum over every operator's received and processed hid
  a loss between two operators.
* *Difference in the number of processed events*, "the difference between the total
  number of processed events and the total number of received events", as a ratio:
  completed / entered. Expired (t_out), dropped (q_size), shed and dead-lettered events
  are not completed; each is counted on its own.
* *Latency*, "the average time taken by an event between the moment it enters and
  leaves the SPS": the mean over completed events, queueing included.
* *Error estimation input / replica*: the MAPE of λ̂_G(t+1) against λ_G(t+1), and of
  the replicas planned at t against what t+1's real load needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from elastic_sps.model.topology import Topology
    from elastic_sps.simulation.sim_series import Series


@dataclass(frozen=True)
class RunMetrics:
    saved_resources: float  # 1 - r / r_over, r_over = the whole pool
    throughput_degradation: float  # mean over intervals of |in - out| / in, at the edges
    processed_ratio: float  # completed at the sinks / entered (input events)
    latency_ms: float  # mean end-to-end latency per completed event
    error_input: float  # MAPE of λ̂_G(t+1) against λ_G(t+1)
    error_replica: float  # MAPE of planned total replicas against what the load needed
    replicas_mean: float
    replicas_max: int
    reconfigurations: int  # operator-intervals whose replica count changed
    replica_changes: int  # Σ |Δr|
    intervals: int
    expired: float = 0.0  # events older than t_out, Σ over operators
    dropped: float = 0.0  # events refused by a full queue (q_size), Σ over operators
    queued_at_end: float = 0.0  # still waiting when the run (and its drain) ended
    rescales_per_hour: float = 0.0  # reconfigurations per hour of the run (flapping)
    shed: float = 0.0  # events shed at ingress (the simulator's shedders)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def mape(actual: np.ndarray, predicted: np.ndarray) -> float:
    mask = actual > 0
    if not mask.any():
        return 0.0
    return float(np.mean(np.abs(actual[mask] - predicted[mask]) / actual[mask]))


def edge_degradation(inputs: Sequence[float], outputs: Sequence[float]) -> float | None:
    """Mean over intervals with input of |input − output| / input (both in input events);
    ``None`` when no interval had input."""
    pairs = [(i, o) for i, o in zip(inputs, outputs, strict=False) if i > 0]
    return float(np.mean([abs(i - o) / i for i, o in pairs])) if pairs else None


def processed_ratio(completed: float, entered: float) -> float:
    return completed / entered if entered > 0 else 1.0


def per_hour(count: float, intervals: int, td: float) -> float:
    return count * 3600.0 / (intervals * td) if intervals and td > 0 else 0.0


def summarise(topo: Topology, s: Series, td: float = 1.0) -> RunMetrics:
    n = s.replay_intervals or len(s.input_events)
    total = s.total_replicas()[:n]
    completed = float(np.sum(s.completed))
    # The plan made at t is for t+1: compare planned[t] with needed[t+1].
    planned = np.asarray(s.planned[: n - 1], dtype=float)
    needed = np.asarray(s.needed[1:n], dtype=float)
    per_op = np.array([np.asarray(v[:n]) for v in s.replicas.values()])
    deltas = np.abs(np.diff(per_op, axis=1)) if per_op.shape[1] > 1 else np.zeros((1, 0))
    return RunMetrics(
        saved_resources=float(1.0 - total.mean() / topo.pool_total),
        throughput_degradation=edge_degradation(s.input_events[:n], s.completed[:n]) or 0.0,
        processed_ratio=processed_ratio(completed, float(np.sum(s.input_events))),
        latency_ms=1000.0 * float(np.sum(s.latency_sum_s)) / completed if completed else 0.0,
        error_input=mape(np.asarray(s.input_events[:n]), np.asarray(s.predicted_input[:n])),
        error_replica=mape(needed, planned),
        replicas_mean=float(total.mean()),
        replicas_max=int(total.max()),
        reconfigurations=int((deltas > 0).sum()),
        replica_changes=int(deltas.sum()),
        intervals=n,
        expired=float(np.sum(s.expired)),
        dropped=float(np.sum(s.dropped)),
        queued_at_end=float(s.queued[-1]) if s.queued else 0.0,
        rescales_per_hour=per_hour(int((deltas > 0).sum()), n, td),
        shed=float(np.sum(s.shed)),
    )
