"""The simulator's forecast of a live run: the same trace, topology, peak and arrivals the
demo replays, simulated with the live engine's calibration (``elastic_sps.model.engine``). Used by
``demo`` (its report's forecast columns) and ``compare --live``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from elastic_sps.control.stabilise import Stabilisation
from elastic_sps.model import topology as topology_mod
from elastic_sps.model import traces
from elastic_sps.model.engine import EngineModel, Limits
from elastic_sps.policies import make_policy
from elastic_sps.simulation.simulator import SimulationResult, simulate


@dataclass(frozen=True)
class Scenario:
    topology: str
    trace: str
    duration: float
    peak_rate: float
    td: float = 1.0


def arrivals_per_interval(sc: Scenario) -> np.ndarray:
    """The replay's events per interval: the 100 ms ticks the demo plays, summed."""
    from elastic_sps.services.ensemble.replay import played

    trace = traces.load(sc.trace)
    ticks = played(trace, trace.duration_s / sc.duration, sc.peak_rate)
    per = max(1, round(sc.td / 0.1))
    pad = (-len(ticks)) % per
    return np.concatenate([ticks, np.zeros(pad)]).reshape(-1, per).sum(axis=1)


def simulated(
    sc: Scenario,
    spec: str,
    engine: EngineModel,
    limits: Limits | None = None,
    drain_s: float = 0.0,
    stabilisation: Stabilisation | None = None,
    latency_goal_s: float | None = None,
) -> tuple[dict[str, Any], list[int]]:
    """The simulator's forecast of the live run: the same arrivals, t_out and drain; the
    figures are ``run_metrics``'s, the definitions the live side uses too."""
    import dataclasses

    from elastic_sps.settings import ServiceSettings

    topo = topology_mod.load(sc.topology)
    arrivals = arrivals_per_interval(sc)
    if engine.cores is None:  # the live run's CPU-bound replicas share these cores
        engine = dataclasses.replace(engine, cores=ServiceSettings().cores_or_local())
    res: SimulationResult = simulate(
        topo,
        arrivals,
        make_policy(spec, topo),
        sc.td,
        engine=engine,
        limits=limits,
        drain_intervals=int(drain_s / sc.td),
        stabilisation=stabilisation,
        latency_goal_s=latency_goal_s,
    )
    m = res.metrics
    lat = np.asarray(res.series.latency_ms)
    sink = np.asarray(res.series.completed)
    figures = {
        "saved_resources": m.saved_resources,
        "throughput_degradation": m.throughput_degradation,
        "processed_ratio": m.processed_ratio,
        "latency_ms": m.latency_ms,
        # the fluid model has one latency per interval: the p99 over intervals, by events
        "latency_ms_p99": _weighted_percentile(lat, sink, 99) if sink.sum() else None,
        "rescales": m.reconfigurations,
        "rescales_per_hour": m.rescales_per_hour,
        "expired": m.expired,
    }
    n = res.series.replay_intervals
    return figures, [int(x) for x in res.series.total_replicas()[:n]]


def _weighted_percentile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    order = np.argsort(values)
    cum = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cum, q / 100.0 * cum[-1])])
