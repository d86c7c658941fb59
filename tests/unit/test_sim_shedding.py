"""Scaling before shedding in the simulator: the admission bound worked by hand, and the
plan-gated shedder against Full Knowledge."""

import pytest

from elastic_sps.model import traces
from elastic_sps.model.topology import load
from elastic_sps.policies import make_policy
from elastic_sps.simulation import sim_shedding
from elastic_sps.simulation.simulator import simulate

pytestmark = pytest.mark.unit
TOPO = load("twitter")  # et 0.4 / 2.5 / 2.0 / 1.5 ms, θ = 1 everywhere, pools of 8
EIGHT = {n: 8 for n in TOPO.names}


def test_the_admission_bound_is_the_tightest_operators():
    """Goal 0.25 s, td 1 s, 8 replicas each: classify_content serves 8 / 2.5 ms = 3,200/s
    and may end the interval with what it clears in 0.25 s, so with 1,000 queued it
    admits 3,200 × 1.25 − 1,000 = 3,000; the others allow more (parse 25,000, author
    5,000, store 6,667)."""
    queued = {"classify_content": 1000.0}
    assert sim_shedding.admissible(TOPO, EIGHT, queued, 0.25, 1.0) == pytest.approx(3000.0)


def test_the_path_time_comes_off_the_goal():
    """The same, but each event spends 0.15 s on its path beside the queues: the queue
    may hold what classify_content clears in 0.1 s, 3,200 × 1.1 − 1,000 = 2,520; a path
    longer than the goal leaves one interval's service, 3,200 − 1,000 = 2,200."""
    queued = {"classify_content": 1000.0}
    bound = sim_shedding.admissible(TOPO, EIGHT, queued, 0.25, 1.0, path_s=0.15)
    assert bound == pytest.approx(2520.0)
    longer = sim_shedding.admissible(TOPO, EIGHT, queued, 0.25, 1.0, path_s=0.4)
    assert longer == pytest.approx(2200.0)


def test_the_goal_shedder_sheds_only_for_the_operators_the_plan_is_short_for():
    """Not short: everything enters. Short for classify_author at 2 replicas (1,000/s):
    1,000 × 1.25 = 1,250 enter of 5,000, although classify_content, which the plan can
    still scale, would bound it lower at its present 1 replica. Full Knowledge: the full
    pools' bound, 3,200 × 1.25 − 1,000 = 3,000."""
    active = EIGHT | {"classify_author": 2, "classify_content": 1}
    queued = {"classify_content": 1000.0}
    args = (TOPO, 5000.0, active, queued)
    assert sim_shedding.admitted("goal", *args, (), 0.25, 1.0) == 5000.0
    short = ("classify_author",)
    assert sim_shedding.admitted("goal", *args, short, 0.25, 1.0) == pytest.approx(1250.0)
    assert sim_shedding.admitted("full", *args, short, 0.25, 1.0) == pytest.approx(3000.0)
    with pytest.raises(ValueError, match="unknown shedder"):
        sim_shedding.admitted("oracle", *args, short, 0.25, 1.0)


def run(peak_over_pool: float, shedder: str, goal_s: float = 0.25):
    arrivals = (
        traces.load("short-spikes").rescaled(peak_over_pool * TOPO.capacity_eps()).per_interval(1.0)
    )
    res = simulate(
        TOPO, arrivals, make_policy("pa-sps:lr", TOPO), 1.0, latency_goal_s=goal_s, shedder=shedder
    )
    return res.metrics, float(arrivals.sum())


def test_a_goal_the_pool_can_meet_sheds_nothing():
    m, _ = run(0.8, "goal")
    assert m.shed == 0.0 and m.processed_ratio == pytest.approx(1.0)


def test_beyond_the_pool_the_goal_shedder_is_within_a_quarter_of_full_knowledge():
    """Peak 2.5 × what the pool holds, goal 250 ms: mean latency within 1.25 × the goal
    and the shed fraction within 1.25 × Full Knowledge's; without shedding the queue
    grows for the whole spike (seconds)."""
    ours, sent = run(2.5, "goal")
    full, _ = run(2.5, "full")
    assert full.shed > 0.2 * sent
    assert ours.shed <= 1.25 * full.shed
    assert ours.latency_ms <= 1.25 * 250
    assert ours.processed_ratio == pytest.approx(1 - ours.shed / sent, abs=1e-3)


def test_a_shedder_needs_a_goal():
    with pytest.raises(ValueError, match="goal"):
        simulate(TOPO, [1.0], make_policy("static:1", TOPO), 1.0, shedder="goal")
