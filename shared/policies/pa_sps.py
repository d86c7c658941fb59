"""PA-SPS (JPDC 2024 §3.2, Eqs. 2-7 and Algorithm 2) and PRESPS (COMPAS 2023, Eqs. 1-6)."""

from __future__ import annotations

from dataclasses import dataclass, field

from shared import pa_sps_model as model
from shared.execution_time import ExecutionTimes
from shared.interval_stats import IntervalStats
from shared.policies.base import Analysis, OperatorDecision
from shared.predictors import Predictor, make_predictor
from shared.topology import Topology


@dataclass
class PASPS:
    """Predict λ̂_G(t+1), spread it over the DAG with θ_i(t) (Eqs. 4-6), add the queued
    events of the operator and, propagated, of its predecessors (Eq. 7), and size each
    operator with Eq. 2 rounded up into [min, pool]. Eq. 2's et_i is max(benchmark,
    observed) as in the authors' code (``shared.execution_time``).
    """

    topology: Topology
    predictor: Predictor
    propagate_queues: bool = True
    name: str = "pa-sps"
    # Eq. 7's weight on a predecessor's queue: "theta_p" as printed, or "theta_ip" (the
    # text's reading, θ_i^p); see pa_sps_model.predicted_queue
    eq7_weight: str = "theta_p"
    costs: ExecutionTimes = field(init=False)

    def __post_init__(self) -> None:
        self.costs = ExecutionTimes(self.topology)

    def analyze(self, stats: IntervalStats) -> Analysis:
        self.predictor.observe(stats.input_events)
        self.costs.observe(stats)
        predicted_input = self.predictor.predict()
        edge_theta = model.edge_thetas(self.topology, stats)
        theta = model.operator_thetas(self.topology, edge_theta)
        received = model.predicted_received(predicted_input, theta)
        queued = model.predicted_queue(
            self.topology,
            stats,
            theta,
            self.propagate_queues,
            edge_theta if self.eq7_weight == "theta_ip" else None,
        )
        decisions = {}
        for op in self.topology.operators:
            load = received[op.name] + queued[op.name]  # Eq. 3
            raw = model.replicas_needed(load, self.costs.et_s(op.name), stats.td)
            decisions[op.name] = OperatorDecision(
                replicas=model.round_replicas(raw, op.min_replicas, op.max_replicas),
                predicted_load=load,
                raw_replicas=raw,
            )
        return Analysis(stats.index, predicted_input, decisions)


def pa_sps(topology: Topology, predictor: str = "lr", **predictor_args: object) -> PASPS:
    return PASPS(topology, make_predictor(predictor, **predictor_args))


def presps(topology: Topology) -> PASPS:
    """PRESPS: the Basic predictor (its Eq. 2 uses λ_G(t)) and only the own queue (Eq. 5)."""
    return PASPS(topology, make_predictor("basic"), propagate_queues=False, name="presps")
