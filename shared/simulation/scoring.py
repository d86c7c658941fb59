"""The ranking used by ``elastic-sps compare`` without ``--policies``.

score = saved_resources − 10 × (1 − processed_ratio) − 0.1 × min(latency_s, 10)

Leaving 1 % of the events unprocessed costs as much as holding 10 % of the pool, and each
second of mean end-to-end latency as much as another 10 %: a policy wins by saving
replicas only while it keeps events flowing and latency low.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from elastic_sps.simulation.run_metrics import RunMetrics
    from elastic_sps.simulation.simulator import SimulationResult


def score(m: RunMetrics) -> float:
    return (
        m.saved_resources
        - 10.0 * (1.0 - m.processed_ratio)
        - 0.1 * min(m.latency_ms / 1000.0, 10.0)
    )


def rank(results: Sequence[SimulationResult]) -> list[SimulationResult]:
    return sorted(results, key=lambda r: score(r.metrics), reverse=True)
