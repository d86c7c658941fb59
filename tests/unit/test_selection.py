"""Full-information predictor selection (shared/control/selection.py), with hand-checked errors."""

from __future__ import annotations

import pytest

from elastic_sps.control.selection import ErrorLeader
from elastic_sps.model import topology
from elastic_sps.policies import make_policy
from elastic_sps.policies.pa_sps import LeaderPredictor
from tests.support.chain_stats import chain_stats

pytestmark = pytest.mark.unit


def test_the_leader_takes_over_only_when_a_margin_better():
    sel = ErrorLeader(("a", "b"), window=2, margin=0.1)
    assert sel.choose() == "a"  # nothing measured: the first listed
    # errors a: 10, b: 9.5 -> 9.5 is not below 0.9 × 10 = 9: keep a
    sel.record({"a": 110.0, "b": 90.5}, 100.0)
    assert (sel.mean_error("a"), sel.mean_error("b")) == (10.0, 9.5)
    assert sel.choose() == "a"
    # a: (10 + 10) / 2 = 10, b: (9.5 + 7.5) / 2 = 8.5 < 9: switch to b
    sel.record({"a": 90.0, "b": 107.5}, 100.0)
    assert sel.mean_error("b") == 8.5 and sel.choose() == "b"


def test_the_window_forgets_old_errors():
    sel = ErrorLeader(("a", "b"), window=2, margin=0.0)
    sel.record({"a": 0.0, "b": 100.0}, 0.0)  # a right, b off by 100
    sel.record({"a": 50.0, "b": 0.0}, 0.0)  # a off by 50, b right
    assert sel.choose() == "a"  # a: 25 < b: 50
    sel.record({"a": 50.0, "b": 0.0}, 0.0)  # b's miss has left the window: a 50, b 0
    assert sel.choose() == "b"


def test_invalid_selector_settings_are_refused():
    with pytest.raises(ValueError):
        ErrorLeader(())
    with pytest.raises(ValueError):
        ErrorLeader(("a",), margin=1.0)


def test_auto_follows_the_predictor_that_forecasts_a_ramp():
    # on a steady ramp (+10 per interval) LR forecasts exactly, Basic is 10 behind:
    # auto leaves Basic (listed first) for LR once their windowed errors differ
    policy = make_policy("pa-sps:auto", topology.load("twitter"), retrain_every=50)
    assert policy.name == "pa-sps:auto"
    predictor = policy.predictor
    assert isinstance(predictor, LeaderPredictor)
    for k in range(30):
        policy.analyze(chain_stats(k, 100.0 + 10 * k))
    assert predictor.chosen == "lr"
    assert predictor.selector.mean_error("basic") == pytest.approx(10.0)
    assert predictor.predict() == pytest.approx(100.0 + 10 * 30)


def test_auto_holds_a_fall_within_the_forecasts_own_error_and_follows_every_rise():
    auto = LeaderPredictor(arms=("basic",))  # Basic forecasts the last value
    handed = []
    for value in (100.0, 100.0, 120.0, 112.0, 105.0):
        auto.observe(value)
        handed.append(auto.predict())
    # errors so far: 0, 20 (mean 10) -> the rise to 120 is followed; then 8 (mean 28/3 =
    # 9.33): 112 is within 120 - 9.33 = 110.67 .. 120, so 120 is held; then 7 (mean
    # 35/4 = 8.75): 105 is below 120 - 8.75 = 111.25, so it is followed
    assert handed == [100.0, 100.0, 120.0, 120.0, 105.0]
    assert auto.selector.mean_error("basic") == pytest.approx(8.75)

    plain = LeaderPredictor(arms=("basic",), hold_small_falls=False)
    for value in (100.0, 100.0, 120.0, 112.0):
        plain.observe(value)
    assert plain.predict() == 112.0
