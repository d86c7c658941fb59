"""PA-SPS (JPDC 2024 §3.2, Eqs. 2-7 and Algorithm 2) and PRESPS (COMPAS 2023, Eqs. 1-6)."""

from __future__ import annotations

from dataclasses import dataclass, field

from elastic_sps.control.bandit import UCB, RewardBounds, RewardWeights, reward
from elastic_sps.control.predictors import Predictor, make_predictor
from elastic_sps.control.selection import ErrorLeader
from elastic_sps.model import pa_sps_model as model
from elastic_sps.model.execution_time import ExecutionTimes
from elastic_sps.model.interval_stats import IntervalStats
from elastic_sps.model.topology import Topology
from elastic_sps.policies.base import Analysis, OperatorDecision

RULE = "PA-SPS Eq. 2: ceil((predicted_received + queue) x et / td), into [min, pool]"


@dataclass
class PASPS:
    """Predict λ̂_G(t+1), spread it over the DAG with θ_i(t) (Eqs. 4-6), add the queued
    events of the operator and, propagated, of its predecessors (Eq. 7), and size each
    operator with Eq. 2 rounded up into [min, pool]. Eq. 2's et_i is max(benchmark,
    observed) as in the authors' code (``elastic_sps.model.execution_time``).
    """

    topology: Topology
    predictor: Predictor
    propagate_queues: bool = True
    name: str = "pa-sps"
    # Eq. 7's weight on a predecessor's queue: "theta_p" as printed, or "theta_ip" (the
    # text's reading, θ_i^p); see pa_sps_model.predicted_queue
    eq7_weight: str = "theta_p"
    # Eq. 2 sizes replicas at 100 % busy; below 1, at this share of td (a utilisation
    # target, as DS2's): the headroom absorbs a forecast that falls short of the spike
    target_utilisation: float = 1.0
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
            et_s = self.costs.et_s(op.name)
            raw = model.replicas_needed(load, et_s, stats.td) / self.target_utilisation
            decisions[op.name] = OperatorDecision(
                replicas=model.round_replicas(raw, op.min_replicas, op.max_replicas),
                predicted_load=load,
                raw_replicas=raw,
                inputs={
                    "predicted_input": predicted_input,
                    "theta": theta[op.name],
                    "predicted_received": received[op.name],
                    "queue": queued[op.name],
                    "et_ms": 1000 * et_s,
                    "td_s": stats.td,
                },
                rule=RULE,
            )
        return Analysis(stats.index, predicted_input, decisions)


def pa_sps(topology: Topology, predictor: str = "lr", **predictor_args: object) -> PASPS:
    return PASPS(topology, make_predictor(predictor, **predictor_args))


def presps(topology: Topology) -> PASPS:
    """PRESPS: the Basic predictor (its Eq. 2 uses λ_G(t)) and only the own queue (Eq. 5)."""
    return PASPS(topology, make_predictor("basic"), propagate_queues=False, name="presps")


AUTO_ARMS = ("basic", "lr", "fft", "ann", "rf")


def _members(arms: tuple[str, ...], retrain_every: int | None) -> dict[str, Predictor]:
    trained = {} if retrain_every is None else {"retrain_every": retrain_every}
    return {a: make_predictor(a, **(trained if a in ("ann", "rf") else {})) for a in arms}


class SelectedPredictor(Predictor):
    """Every predictor observes every interval (so whichever is chosen next has the whole
    history); only the chosen one's forecast is returned."""

    name = "selected"

    def __init__(self, arms: tuple[str, ...] = AUTO_ARMS, retrain_every: int | None = None):
        super().__init__()
        self.members = _members(arms, retrain_every)
        self.chosen = arms[0]

    def observe(self, value: float) -> None:
        super().observe(value)
        for p in self.members.values():
            p.observe(value)

    def predict(self) -> float:
        return self.members[self.chosen].predict()

    def _forecast(self, y: object) -> float:  # predict() is overridden: never called
        raise NotImplementedError


class LeaderPredictor(SelectedPredictor):
    """``pa-sps:auto``: every member forecasts every interval; the one with the lowest
    recent absolute error forecasts for the plan (``elastic_sps.control.selection``)."""

    name = "auto"

    def __init__(
        self,
        arms: tuple[str, ...] = AUTO_ARMS,
        retrain_every: int | None = None,
        selector: ErrorLeader | None = None,
        hold_small_falls: bool = True,
    ):
        super().__init__(arms, retrain_every)
        self.selector = selector or ErrorLeader(arms)
        self.pending: dict[str, float] = {}  # each member's forecast for the next interval
        self.hold_small_falls = hold_small_falls
        self.handed: float | None = None  # the forecast for the next interval

    def observe(self, value: float) -> None:
        if self.pending:
            self.selector.record(self.pending, value)
        super().observe(value)
        self.pending = {a: p.predict() for a, p in self.members.items()}
        self.chosen = self.selector.choose()
        self.handed = self._hand_out(self.pending[self.chosen])

    def _hand_out(self, f: float) -> float:
        """The chosen member's forecast ``f``; with ``hold_small_falls``, a forecast below
        the last one handed out by less than the chosen member's recent mean absolute
        error is not followed (the last one is handed out again). A fall within the
        forecast's own typical error is no evidence of less load, and following it moves
        replicas out and back in; a rise is always followed, so a spike is never met late."""
        held = self.handed
        if (
            self.hold_small_falls
            and held is not None
            and held - self.selector.mean_error(self.chosen) <= f < held
        ):
            return held
        return f

    def predict(self) -> float:
        return self.handed if self.handed is not None else super().predict()


@dataclass
class PASPSBandit(PASPS):
    """PA-SPS with the predictor chosen by the authors' bandit (``elastic_sps.control.bandit``,
    ``pa-sps:bandit``): every ``window`` intervals the chosen predictor is rewarded from
    the window's measured latency (against ``goal_ms``), throughput degradation and
    saved resources, and UCB picks the next."""

    window: int = 5
    goal_ms: float = 5_000.0
    weights: RewardWeights = field(default_factory=RewardWeights)
    selector: UCB = field(init=False)
    _samples: list[tuple[float, float, float]] = field(init=False, default_factory=list)
    choices: list[tuple[int, str]] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        super().__post_init__()
        assert isinstance(self.predictor, SelectedPredictor)
        self.selector = UCB(tuple(self.predictor.members))
        self.predictor.chosen = self.selector.choose()
        self.choices.append((0, self.predictor.chosen))

    def window_sample(self, stats: IntervalStats) -> tuple[float, float, float]:
        """(latency ms, degradation, saving) of one interval, as the paper defines them."""
        sinks = [s for s in self.topology.sinks if s in stats.operators]
        done = sum(stats.operators[s].processed for s in sinks) / max(1, len(sinks))
        degradation = (
            abs(stats.input_events - done) / stats.input_events if stats.input_events else 0.0
        )
        used = sum(o.active_replicas for o in stats.operators.values())
        pool = sum(op.max_replicas for op in self.topology.operators)
        return (stats.latency_ms or 0.0, degradation, 1 - used / pool)

    def analyze(self, stats: IntervalStats) -> Analysis:
        self._samples.append(self.window_sample(stats))
        if len(self._samples) >= self.window:
            lat, deg, sav = (sum(x) / len(self._samples) for x in zip(*self._samples, strict=True))
            bounds = RewardBounds.for_goal(self.goal_ms)
            self.selector.update(reward(lat, deg, sav, self.weights, bounds))
            self._samples.clear()
            assert isinstance(self.predictor, SelectedPredictor)
            self.predictor.chosen = self.selector.choose()
            self.choices.append((stats.index, self.predictor.chosen))
        return super().analyze(stats)


def pa_sps_auto(topology: Topology, retrain_every: int | None = None) -> PASPS:
    """PA-SPS forecasting with the recently most accurate predictor
    (``elastic_sps.control.selection``)."""
    p = PASPS(topology, LeaderPredictor(retrain_every=retrain_every))
    p.name = "pa-sps:auto"
    return p


def pa_sps_bandit(
    topology: Topology,
    window: int = 5,
    goal_ms: float = 5_000.0,
    retrain_every: int | None = None,
) -> PASPSBandit:
    predictor = SelectedPredictor(retrain_every=retrain_every)
    p = PASPSBandit(topology, predictor, window=window, goal_ms=goal_ms)
    p.name = "pa-sps:bandit"
    return p
