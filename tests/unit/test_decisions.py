"""Every decision explained: what the plan records per operator, and `explain`'s words."""

from __future__ import annotations

import pytest

from elastic_sps.contracts.analysis import AnalysisRecord, OperatorNeed
from elastic_sps.control.explain import describe, find
from elastic_sps.control.predictors import make_predictor
from elastic_sps.control.stabilise import Stabilisation
from elastic_sps.model import topology
from elastic_sps.model.interval_stats import IntervalStats, OperatorStats
from elastic_sps.policies.pa_sps import PASPS
from elastic_sps.services.plan.core import Planner, decisions
from tests.support.records import analysis_record

pytestmark = pytest.mark.unit
TOPO = topology.load("twitter")  # pools 1-8 each


def analysis(raw: dict[str, float], current: int = 2) -> AnalysisRecord:
    ops = {
        n: OperatorNeed(replicas=min(8, max(1, -int(-r // 1))), current=current, raw_replicas=r)
        for n, r in raw.items()
    }
    return analysis_record(12, ops, policy="pa-sps", predicted_input=1000)


def test_the_pool_and_the_budget_are_named_as_limits():
    rec = analysis({"parse": 0.4, "classify_content": 9.3, "classify_author": 2.0, "store": 1.5})
    plan = Planner(TOPO).plan(rec)
    by_op = {d.operator: d for d in decisions(TOPO, rec, plan)}
    # 9.3 replicas asked of a pool of 8: the pool held it at 8
    assert (by_op["classify_content"].asked, by_op["classify_content"].chosen) == (8, 8)
    assert by_op["classify_content"].limited_by == ["pool"]
    assert by_op["classify_author"].limited_by == [] and by_op["classify_author"].chosen == 2
    # a budget of 6 for 1 + 8 + 2 + 2 = 13 asked: Stela's allocator limits every change
    plan = Planner(TOPO, budget=6).plan(rec)
    limited = {d.operator: d.limited_by for d in decisions(TOPO, rec, plan)}
    assert sum(plan.targets.values()) <= 6
    assert "budget" in limited["classify_content"]


def test_the_stabiliser_is_named_when_it_holds_a_scale_in():
    planner = Planner(TOPO, rules=Stabilisation(scale_down_window_intervals=3))
    planner.plan(analysis(dict.fromkeys(TOPO.names, 4.0), current=4))
    rec = analysis(dict.fromkeys(TOPO.names, 1.0), current=4)
    plan = planner.plan(rec)
    d = {x.operator: x for x in decisions(TOPO, rec, plan)}["store"]
    assert (d.asked, d.chosen, d.limited_by) == (1, 4, ["scale-down window"])


def test_pa_sps_records_its_inputs_with_the_hand_computed_need():
    """One operator, et 10 ms, td 1 s, 300 events received and 50 queued: Eq. 2 asks
    (300 + 50) × 0.010 / 1 = 3.5 -> 4 replicas (the Basic predictor repeats 300)."""
    topo = topology.linear(
        "one", [topology.Operator("work", et_ms=10.0, min_replicas=1, max_replicas=8)]
    )
    policy = PASPS(topo, make_predictor("basic"))
    ops = {
        "work": OperatorStats(
            received=300,
            processed=300,
            queued=50,
            active_replicas=2,
            received_from={"source": 300},
            et_s=0.010,
            busy_s=3.0,
        )
    }
    out = policy.analyze(IntervalStats(0, 1.0, 300, ops)).operators["work"]
    assert out.replicas == 4 and out.raw_replicas == pytest.approx(3.5)
    assert out.inputs["predicted_received"] == pytest.approx(300)
    assert out.inputs["queue"] == pytest.approx(50)
    assert out.inputs["et_ms"] == pytest.approx(10.0)
    assert out.inputs["theta"] == pytest.approx(1.0)


def test_explain_says_it_in_words():
    d = {
        "interval": 12,
        "operator": "store",
        "policy": "pa-sps",
        "current": 2,
        "asked": 8,
        "raw": 9.3,
        "chosen": 8,
        "rule": "PA-SPS Eq. 2",
        "pool": [1, 8],
        "inputs": {"predicted_input": 1200.0, "queue": 40.0, "et_ms": 1.5},
        "limited_by": ["pool"],
        "dry_run": True,
    }
    text = describe(d)
    assert "interval 12, operator store (pool 1-8), policy pa-sps" in text
    assert "predicted input 1,200 events; queue 40.0 events; execution time 1.50 ms" in text
    assert "PA-SPS Eq. 2 -> 9.30 replicas, asked 8" in text
    assert "the plan scales out to 8 (was 2), limited by pool" in text
    assert "dry run" in text
    assert find([d, {**d, "interval": 13}], "store", 13)[0]["interval"] == 13
