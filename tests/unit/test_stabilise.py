"""Plan stabilisation: hand-worked sequences."""

import numpy as np
import pytest

from elastic_sps.contracts.analysis import AnalysisRecord, OperatorNeed
from elastic_sps.control.stabilise import Stabilisation, Stabiliser
from elastic_sps.model import topology
from elastic_sps.policies import make_policy
from elastic_sps.services.plan.core import Planner
from elastic_sps.simulation.simulator import simulate
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
    assert follow(Stabilisation(scale_down_window_intervals=3), [8, 2, 8, 2, 2, 2]) == [
        8,
        8,
        8,
        8,
        8,
        2,
    ]
    # it scales in to the highest recommendation in the window, not straight to the low,
    # and then waits a whole window before the next scale-in: asks 8, 5, 2, 2, 2 with a
    # 2-interval window see [8], [8, 5], [5, 2] -> 5, then the window restarts at [5, 5]:
    # [5, 2] holds 5, [2, 2] -> 2
    assert follow(Stabilisation(scale_down_window_intervals=2), [8, 5, 2, 2, 2]) == [8, 8, 5, 5, 2]


def test_max_step_moves_at_most_that_many_replicas_per_plan():
    assert follow(Stabilisation(max_step=2), [8, 8, 8, 8, 1]) == [3, 5, 7, 8, 6]


def test_without_rules_the_policy_is_followed():
    assert follow(Stabilisation(), [8, 2, 8]) == [8, 2, 8]


def test_the_plan_service_names_the_rule_that_limited_a_plan():
    topo = topology.load("twitter")
    planner = Planner(topo, rules=Stabilisation(scale_down_window_intervals=3))

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
        stabilisation=Stabilisation(scale_down_window_intervals=10),
    )
    assert calm.metrics.replica_changes < free.metrics.replica_changes
    assert calm.metrics.processed_ratio >= free.metrics.processed_ratio - 1e-9


def test_an_analysis_that_misses_operators_is_bad_input_not_a_bug():
    """The plan service dead-letters a ContractError; any other exception crashes it."""
    from elastic_sps.contracts.base import ContractError

    topo = topology.load("twitter")
    rec = analysis_record(0, {"parse": OperatorNeed(replicas=1, current=1)})
    with pytest.raises(ContractError, match="lacks operators"):
        Planner(topo).plan(rec)


def follow_raw(rules: Stabilisation, raw: list[float], start: int = 1) -> list[int]:
    """One raw need per interval; the policy asks ceil(raw)."""
    import math

    s, cur, out = Stabiliser(rules), start, []
    for need in raw:
        cur = s.apply({"a": cur}, {"a": math.ceil(need)}, {"a": need})[0]["a"]
        out.append(cur)
    return out


def test_the_margin_keeps_a_need_that_hovers_below_an_integer_from_flipping_the_count():
    # a need of 4.2, 3.9, 4.1, 3.95: the policy asks 5, 4, 5, 4 and flips at every plan;
    # with a margin of 0.8 a scale-in goes only to ceil(need + 0.8): ceil(4.7) = 5, so
    # the count stays 5. A real drop to 2.5 scales in to ceil(3.3) = 4, then to 2.0 ->
    # ceil(2.8) = 3.
    raw = [4.2, 3.9, 4.1, 3.95, 2.5, 2.0]
    assert follow_raw(Stabilisation(), raw) == [5, 4, 5, 4, 3, 2]
    assert follow_raw(Stabilisation(scale_down_margin=0.8), raw) == [5, 5, 5, 5, 4, 3]
    # scale-out is not touched: 1.0 -> 6.3 goes straight to 7
    assert follow_raw(Stabilisation(scale_down_margin=0.8), [1.0, 6.3]) == [1, 7]


def test_the_tolerance_holds_a_need_just_above_the_count():
    """From 4 replicas, needs of 4.2, 4.3, 4.5, 3.9: the policy asks 5, 5, 5, 4. With a
    tolerance of 0.35, 4.2 and 4.3 are held (ceil(3.85) = ceil(3.95) = 4, no more than the
    4 running); 4.5 scales out (ceil(4.15) = 5); 3.9 scales in to 4 as before."""
    raw = [4.2, 4.3, 4.5, 3.9]
    assert follow_raw(Stabilisation(), raw, start=4) == [5, 5, 5, 4]
    assert follow_raw(Stabilisation(scale_up_tolerance=0.35), raw, start=4) == [4, 4, 5, 4]
    # a need the latency goal raised (an ask of 6 against a raw 4.2) is not held
    s = Stabiliser(Stabilisation(scale_up_tolerance=0.35))
    assert s.apply({"a": 4}, {"a": 6}, {"a": 4.2}) == ({"a": 6}, {})
    held = Stabiliser(Stabilisation(scale_up_tolerance=0.35)).apply({"a": 4}, {"a": 5}, {"a": 4.2})
    assert held == ({"a": 4}, {"a": "scale-up tolerance"})


def test_a_steady_fall_is_followed_at_its_latest_ask_a_dip_is_held():
    """Window 3, from 1: asks 8, 6, 5, 4, 3, 2, 2. The window sees [8, 6, 5] (8 is the
    count: nothing below it yet), then [6, 5, 4]: all below 8 and none rose, so it scales
    in to the latest ask, 4, where the window's highest would be 6. The window restarts
    at [4, 4, 4]; [4, 4, 3] and [4, 3, 2] hold 4; [3, 2, 2] falls again -> 2. Without the
    rule: 8, then 6 (the highest of [6, 5, 4]), held through [6, 6, 3] and [6, 3, 2],
    then 3 (the highest of [3, 2, 2])."""
    asks = [8, 6, 5, 4, 3, 2, 2]
    falling = Stabilisation(scale_down_window_intervals=3, follow_falling_need=True)
    assert follow(falling, asks) == [8, 8, 8, 4, 4, 4, 2]
    assert follow(Stabilisation(scale_down_window_intervals=3), asks) == [8, 8, 8, 6, 6, 6, 3]
    # asks 5, 6, 4 from 8: the need rose inside the window, a dip: the highest, 6
    assert follow(falling, [8, 5, 6, 4], start=8) == [8, 8, 8, 6]


def test_relative_tolerances_hold_small_changes_at_a_high_count():
    """Up: ratio 0.2 with 0.35 replica: at 8 replicas the tolerance is max(0.35, 1.6),
    so a need of 9.5 is held (ceil(7.9) = 8) and 9.7 scales out to its ask of 10
    (ceil(8.1) = 9 > 8); at 2 replicas it is max(0.35, 0.4): 2.3 is held, 2.45 is not.
    Down: ratio 0.15 holds a scale-in of fewer than 0.15 x count replicas: from 8, a
    step to 7 (1 < 1.2) waits, a step to 6 does not; from 4, 3 is 1 >= 0.6 and goes."""
    up = Stabilisation(scale_up_tolerance=0.35, scale_up_tolerance_ratio=0.2)
    assert follow_raw(up, [9.5], start=8) == [8]
    assert follow_raw(up, [9.7], start=8) == [10]
    assert follow_raw(up, [2.3, 2.45], start=2) == [2, 3]
    down = Stabilisation(scale_down_tolerance_ratio=0.15)
    held = Stabiliser(down).apply({"a": 8}, {"a": 7})
    assert held == ({"a": 8}, {"a": "scale-down tolerance"})
    assert Stabiliser(down).apply({"a": 8}, {"a": 6}) == ({"a": 6}, {})
    assert Stabiliser(down).apply({"a": 4}, {"a": 3}) == ({"a": 3}, {})


def test_the_plan_service_settings_carry_every_rule(monkeypatch):
    from elastic_sps.settings import PlanSettings

    monkeypatch.setenv("SPS_STABILISER", "none")
    monkeypatch.setenv("SPS_SCALE_UP_TOLERANCE_RATIO", "0.2")
    monkeypatch.setenv("SPS_SCALE_DOWN_TOLERANCE_RATIO", "0.15")
    monkeypatch.setenv("SPS_FOLLOW_FALLING_NEED", "true")
    monkeypatch.setenv("SPS_SCALE_DOWN_MARGIN", "0.35")
    rules = PlanSettings().stabilisation()
    assert rules == Stabilisation(
        scale_down_margin=0.35,
        scale_up_tolerance_ratio=0.2,
        scale_down_tolerance_ratio=0.15,
        follow_falling_need=True,
    )


def test_the_calm_preset_survives_the_trip_through_the_plan_services_environment(
    monkeypatch,
):
    """compare --live hands CALM to the plan service as SPS_* variables (plan_env); the
    service reads them back (PlanSettings): every rule arrives, the window in seconds."""

    from elastic_sps.control.stabilise import CALM, plan_env
    from elastic_sps.settings import PlanSettings

    for name, value in plan_env(CALM, 2.0).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SPS_TD", "2.0")
    settings = PlanSettings()
    assert settings.scale_down_window_s == 6.0
    assert settings.stabilisation() == CALM  # 6 s = 3 intervals of 2 s


def test_the_plan_service_runs_the_calm_preset_unless_told_otherwise(monkeypatch):
    """A user who sets nothing gets the measured stabiliser; SPS_STABILISER=none gives the
    papers' policies as written; a rule set on its own goes over the preset."""
    from elastic_sps.control.stabilise import CALM
    from elastic_sps.settings import PlanSettings

    monkeypatch.setenv("SPS_TD", "1.0")
    assert PlanSettings().stabilisation() == CALM
    monkeypatch.setenv("SPS_STABILISER", "none")
    assert PlanSettings().stabilisation() == Stabilisation()
    monkeypatch.setenv("SPS_STABILISER", "calm")
    monkeypatch.setenv("SPS_SCALE_DOWN_WINDOW_S", "10")
    monkeypatch.setenv("SPS_HOLD_ON_BACKLOG", "false")
    rules = PlanSettings().stabilisation()
    assert (rules.scale_down_window_intervals, rules.hold_on_backlog) == (10, False)
    assert rules.scale_down_margin == CALM.scale_down_margin
    monkeypatch.setenv("SPS_STABILISER", "wild")
    with pytest.raises(ValueError, match="unknown stabiliser 'wild'"):
        PlanSettings()


def test_no_scale_in_while_the_backlog_would_not_clear_in_one_interval():
    from elastic_sps.control.stabilise import Backlog

    rules = Stabilisation(hold_on_backlog=True)
    # et 10 ms, td 1 s: a replica processes 100 events an interval. Queue 250 + 100
    # predicted = 350 events need 3.5 replica-intervals: 4 replicas may not go to 2 (200)
    # nor 3 (300); with 50 queued (150 in all) they may go to 2. From 6, the first
    # backlog scales in only to the 4 that clear it.
    behind = {"a": Backlog(queued=250, predicted=100, et_s=0.010)}
    caught = {"a": Backlog(queued=50, predicted=100, et_s=0.010)}

    def once(current: int, want: int, b: dict) -> tuple[dict, dict]:
        return Stabiliser(rules).apply({"a": current}, {"a": want}, None, b, 1.0)

    assert once(4, 2, behind) == ({"a": 4}, {"a": "backlog"})
    assert once(4, 3, behind) == ({"a": 4}, {"a": "backlog"})
    assert once(4, 2, caught) == ({"a": 2}, {})
    assert once(6, 2, behind) == ({"a": 4}, {"a": "backlog"})
    # it never blocks a scale-out
    assert once(1, 3, behind) == ({"a": 3}, {})


def test_a_preset_rides_on_the_policy_spec():
    from elastic_sps.control.stabilise import CALM, plan_env, split_spec

    assert split_spec("pa-sps:lr") == ("pa-sps:lr", None)
    assert split_spec("pa-sps:lr+calm") == ("pa-sps:lr", CALM)
    with pytest.raises(ValueError, match="unknown stabiliser preset 'x'"):
        split_spec("ds2+x")
    assert plan_env(CALM, 2.0) == {
        "SPS_STABILISER": "none",
        "SPS_SCALE_DOWN_WINDOW_S": "6.0",
        "SPS_SCALE_DOWN_MARGIN": "0.35",
        "SPS_HOLD_ON_BACKLOG": "true",
        "SPS_SCALE_UP_TOLERANCE": "0.35",
        "SPS_SCALE_UP_TOLERANCE_RATIO": "0.25",
        "SPS_SCALE_DOWN_TOLERANCE_RATIO": "0.15",
        "SPS_FOLLOW_FALLING_NEED": "true",
    }


def test_the_plan_service_reads_the_backlog_and_raw_need_from_the_analysis():
    topo = topology.load("twitter")
    planner = Planner(topo, rules=Stabilisation(scale_down_margin=0.8, hold_on_backlog=True))
    # every operator at 6, the policy asks 3 for a raw need of 2.6: the margin keeps
    # ceil(3.4) = 4 where nothing is queued; where 900 events wait at et 5 ms (4.5
    # replica-seconds with 0 predicted), 4 replicas cannot clear it in one interval: it
    # scales in only to 5.
    calm = OperatorNeed(replicas=3, current=6, raw_replicas=2.6)
    behind = OperatorNeed(replicas=3, current=6, raw_replicas=2.6, queued=900, et_s=0.005)
    needs = {n: (behind if n == "store" else calm) for n in topo.names}
    plan = planner.plan(analysis_record(0, needs))
    assert plan.targets["store"] == 5 and plan.limited["store"] == "backlog"
    others = {n: plan.targets[n] for n in topo.names if n != "store"}
    assert set(others.values()) == {4}
    assert {plan.limited[n] for n in others} == {"scale-down margin"}


def test_compare_runs_a_policy_calm_and_as_written_side_by_side(capsys):
    import json

    from elastic_sps.services.cli import main

    argv = ["compare", "--trace", "short-spikes", "--policies", "pa-sps:lr,pa-sps:lr+calm"]
    assert main([*argv, "--json"]) == 0
    written, calm = json.loads(capsys.readouterr().out)
    assert (written["policy"], calm["policy"]) == ("pa-sps:lr", "pa-sps:lr+calm")
    assert calm["rescales_per_hour"] < written["rescales_per_hour"]
    assert calm["processed_ratio"] >= written["processed_ratio"] - 1e-9


def test_the_rules_compare_with_the_count_last_planned_not_the_lagging_reported_one():
    """Live, the statistics report an operator's count a plan or two late: planned 8 at
    the spike, the next interval still reports 2. Against the report the policy's 2
    looked like no change and the window never held (8, 2, 8, 2 live); against the
    plan it is a scale-in inside the window."""
    s = Stabiliser(Stabilisation(scale_down_window_intervals=3))
    assert s.apply({"a": 2}, {"a": 8})[0] == {"a": 8}
    assert s.apply({"a": 2}, {"a": 2}) == ({"a": 8}, {"a": "scale-down window"})


def test_a_presets_window_in_seconds_is_the_same_hold_at_any_td():
    from elastic_sps.control.stabilise import STEADY, build_rules

    assert STEADY.at_td(1.0).scale_down_window_intervals == 60
    assert STEADY.at_td(5.0).scale_down_window_intervals == 12
    assert build_rules(STEADY, 5.0).scale_down_window_intervals == 12
    assert build_rules(STEADY, 5.0, scale_down_window_s=30).scale_down_window_intervals == 6


def test_patient_holds_a_scale_in_for_five_minutes_at_any_td():
    from elastic_sps.control.stabilise import PATIENT, split_spec

    assert split_spec("pa-sps:basic+patient") == ("pa-sps:basic", PATIENT)
    assert PATIENT.at_td(1.0).scale_down_window_intervals == 300
    assert PATIENT.at_td(5.0).scale_down_window_intervals == 60
