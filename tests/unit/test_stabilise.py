"""Plan stabilisation: hand-worked sequences."""

import numpy as np
import pytest

from services.plan.core import Planner
from shared import topology
from shared.contracts.analysis import AnalysisRecord, OperatorNeed
from shared.policies import make_policy
from shared.simulator import simulate
from shared.stabilise import Stabilisation, Stabiliser
from tests.support.records import analysis_record

pytestmark = pytest.mark.unit


def follow(rules: Stabilisation, wanted: list[int], start: int = 1) -> list[int]:
    """Apply one recommendation per interval; the target becomes the current count."""
    s, cur, out = Stabiliser(rules), start, []
    for w in wanted:
        cur = s.apply({"a": cur}, {"a": w})[0]["a"]
        out.append(cur)
    return out


def test_a_dip_inside_the_window_changes_nothing_and_scale_out_is_never_delayed():
    # window 3: 8, 2, 8, 2 stays at 8; three 2s in a row scale in on the third.
    assert follow(Stabilisation(scale_down_window=3), [8, 2, 8, 2, 2, 2]) == [8, 8, 8, 8, 8, 2]
    # it scales in to the highest recommendation in the window, not straight to the low
    assert follow(Stabilisation(scale_down_window=2), [8, 5, 2, 2]) == [8, 8, 5, 2]


def test_max_step_moves_at_most_that_many_replicas_per_plan():
    assert follow(Stabilisation(max_step=2), [8, 8, 8, 8, 1]) == [3, 5, 7, 8, 6]


def test_without_rules_the_policy_is_followed():
    assert follow(Stabilisation(), [8, 2, 8]) == [8, 2, 8]


def test_the_plan_service_names_the_rule_that_limited_a_plan():
    topo = topology.load("twitter")
    planner = Planner(topo, scale_down_window_s=3.0)

    def record(interval: int, replicas: int) -> AnalysisRecord:
        need = OperatorNeed(replicas=replicas, current=8)
        return analysis_record(interval, dict.fromkeys(topo.names, need))

    first = planner.plan(record(0, 8))
    dip = planner.plan(record(1, 2))
    assert first.limited == {} and set(dip.targets.values()) == {8}
    assert set(dip.limited.values()) == {"scale-down window"}


def test_the_simulator_runs_the_same_rules():
    """A 10-interval window on a spike trace: never more replica changes than without."""
    topo = topology.load("twitter")
    arrivals = np.array([400.0, 3000.0, 400.0, 3000.0, 400.0] * 6)
    free = simulate(topo, arrivals, make_policy("pa-sps:basic", topo), 1.0)
    calm = simulate(
        topo,
        arrivals,
        make_policy("pa-sps:basic", topo),
        1.0,
        stabilisation=Stabilisation(scale_down_window=10),
    )
    assert calm.metrics.replica_changes < free.metrics.replica_changes
    assert calm.metrics.processed_ratio >= free.metrics.processed_ratio - 1e-9


def test_an_analysis_that_misses_operators_is_bad_input_not_a_bug():
    """The plan service dead-letters a ContractError; any other exception crashes it."""
    from shared.contracts.base import ContractError

    topo = topology.load("twitter")
    rec = analysis_record(0, {"parse": OperatorNeed(replicas=1, current=1)})
    with pytest.raises(ContractError, match="lacks operators"):
        Planner(topo).plan(rec)
