"""One latency goal: the plan scales to meet it, and says when it cannot (short)."""

import pytest

from elastic_sps.control.plan import goal_replicas, make_plan
from elastic_sps.control.stabilise import Backlog
from elastic_sps.las.shedder import HorizonAverageQueuingLatency, StrawManShedder
from elastic_sps.las.wallclock import CalibratedShedder
from elastic_sps.model import topology
from elastic_sps.policies.base import Analysis, OperatorDecision

pytestmark = pytest.mark.unit
TOPO = topology.load("twitter")  # every pool 1-8


def analysis(replicas: int) -> Analysis:
    return Analysis(3, 1000.0, {n: OperatorDecision(replicas) for n in TOPO.names})


def test_goal_replicas_clear_the_queue_within_the_goal_and_keep_up_with_the_input():
    # 400 events queued at 2.5 ms are 1.0 s of work; within a 0.5 s goal that is 2
    # replicas; 800 predicted events in a 1 s interval are 2.0 s of work: 2 more -> 4.
    assert goal_replicas(Backlog(queued=400, predicted=800, et_s=0.0025), 1.0, 0.5) == 4
    # nothing queued: only the input's share, ceil(0.2) = 1
    assert goal_replicas(Backlog(queued=0, predicted=80, et_s=0.0025), 1.0, 0.5) == 1


def test_the_goal_raises_a_need_the_policy_set_too_low_and_names_it():
    backlog = dict.fromkeys(TOPO.names, Backlog(0, 0, 0.001))
    backlog["classify_content"] = Backlog(queued=400, predicted=800, et_s=0.0025)
    current = dict.fromkeys(TOPO.names, 1)
    plan = make_plan(TOPO, analysis(1), current, 1.0, backlog=backlog, goal_s=0.5)
    assert plan.targets["classify_content"] == 4
    assert plan.limited == {"classify_content": "latency goal"}
    assert plan.short == ()  # 4 fit the pool of 8: scaling meets it, nothing to shed
    # without a goal the policy's 1 stands
    assert (
        make_plan(TOPO, analysis(1), current, 1.0, backlog=backlog).targets["classify_content"] == 1
    )


def test_a_need_beyond_the_pool_or_the_budget_makes_the_plan_short():
    # 2,000 queued at 2.5 ms within 0.5 s: 10 replicas, the pool holds 8: short
    backlog = dict.fromkeys(TOPO.names, Backlog(0, 0, 0.001))
    backlog["classify_content"] = Backlog(queued=2000, predicted=0, et_s=0.0025)
    current = dict.fromkeys(TOPO.names, 1)
    plan = make_plan(TOPO, analysis(1), current, 1.0, backlog=backlog, goal_s=0.5)
    assert plan.targets["classify_content"] == 8 and plan.short == ("classify_content",)
    # every operator asks 3 (12 in all) under a budget of 8: Stela cuts some, they are short
    cut = make_plan(TOPO, analysis(3), current, 1.0, budget=8)
    assert sum(cut.targets.values()) == 8
    assert set(cut.short) == {n for n in TOPO.names if cut.targets[n] < 3} != set()


def test_a_held_shedder_admits_everything_and_sheds_again_when_released():
    # τ = 10 ms, each tuple costs 10 ms, 100 arrive at once: the k-th admitted waits
    # (k - 1) × 10 ms, so LAS soon sheds; held, it admits all 100.
    def fresh() -> CalibratedShedder:
        goal = HorizonAverageQueuingLatency(0.010, horizon_s=30.0)
        return CalibratedShedder(StrawManShedder(goal, mean_duration=0.010))

    keys = list(range(100))
    import numpy as np

    free = fresh()
    free.sync()
    assert free.decide(np.array(keys), 0.0, [str(k) for k in keys])[0].sum() > 0
    held = fresh()
    held.held = True
    held.sync()
    assert held.decide(np.array(keys), 0.0, [str(k) for k in keys])[0].sum() == 0
    held.held = False
    held.sync()  # released: the backlog it admitted is still charged, so it sheds at once
    assert held.decide(np.array(keys), 0.001, [str(k) for k in keys])[0].all()


def test_the_simulator_runs_the_same_goal():
    """PA-SPS on a spike trace, with a goal far below its latency without one: the plan
    adds replicas for the queues, so the mean latency drops and more replicas are used."""
    from elastic_sps.model import traces
    from elastic_sps.policies import make_policy
    from elastic_sps.simulation.simulator import simulate

    arrivals = traces.load("short-spikes").per_interval(1.0)
    free = simulate(TOPO, arrivals, make_policy("pa-sps:lr", TOPO), 1.0).metrics
    goal = simulate(
        TOPO, arrivals, make_policy("pa-sps:lr", TOPO), 1.0, latency_goal_s=0.005
    ).metrics
    assert goal.latency_ms < free.latency_ms
    assert goal.saved_resources < free.saved_resources
