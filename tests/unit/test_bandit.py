"""The UCB bandit over predictors (shared/control/bandit.py), with hand-computed scores."""

from __future__ import annotations

import pytest

from elastic_sps.control.bandit import UCB, RewardBounds, reward
from elastic_sps.model import topology
from elastic_sps.policies import make_policy
from elastic_sps.policies.pa_sps import PASPSBandit
from tests.support.chain_stats import chain_stats

pytestmark = pytest.mark.unit


def test_reward_weighs_the_three_normalised_terms():
    # latency 2,500 of a 5,000 ms goal -> 0.5: 0.34 × 0.5 = 0.170
    # degradation 0.05 of the authors' newest 0.10 -> 0.5: 0.33 × 0.5 = 0.165
    # saving 0.25 of 0.5 -> 0.5: 0.33 × 0.5 = 0.165
    r = reward(2_500, 0.05, 0.25, bounds=RewardBounds(latency_ms=(0, 5_000)))
    assert r == pytest.approx(0.5)
    # their earlier bound of 0.25: 0.05 -> 0.2: 0.33 × 0.8 = 0.264, 0.599 in all
    older = RewardBounds(latency_ms=(0, 5_000), degradation=(0, 0.25))
    assert reward(2_500, 0.05, 0.25, bounds=older) == pytest.approx(0.599)
    assert reward(9_999, 1.0, 0.0, bounds=RewardBounds(latency_ms=(0, 5_000))) == 0.0  # clamped


def test_without_cold_start_the_bonus_explores():
    """The newest mab.go: no cold start, no cooldown. t = 1: every score is 0 + 2 √(ln 1)
    = 0, a tie: the first arm. Its reward 0.6 is its value; t = 2: a 0.6 + 2 √(ln 2 / 2)
    = 1.7774, b 0 + 2 √(ln 2 / 1) = 1.6651: a again; its EMA 0.9 × 0.6 + 0.1 × 0.6 = 0.6;
    t = 3: a 0.6 + 2 √(ln 3 / 3) = 1.8103, b 2 √(ln 3) = 2.0963: b."""
    ucb = UCB(("a", "b"))
    assert (ucb.cooldown, ucb.cold_start) == (0, False)
    seen = []
    for r in (0.6, 0.6, 0.2):
        seen.append(ucb.choose())
        ucb.update(r)
    assert seen == ["a", "a", "b"]


def test_cold_start_then_the_best_upper_bound():
    ucb = UCB(("a", "b"), c=2.0, alpha=0.1, cooldown=1, cold_start=True)
    assert ucb.choose() == "a"
    ucb.update(0.5)  # the first reward is the value: Q[a] = 0.5
    assert ucb.choose() == "b"
    ucb.update(0.9)
    # t = 3: a 0.5 + 2 √(ln 3 / 2) = 1.982, b 0.9 + 2 √(ln 3 / 2) = 2.382
    assert ucb.choose() == "b"
    ucb.update(0.1)  # EMA: 0.9 × 0.9 + 0.1 × 0.1 = 0.82
    assert ucb.q["b"] == pytest.approx(0.82)
    # before the 4th choice, t = 3: a 0.5 + 2 √(ln 3 / 2) = 1.9823, b 0.82 + 2 √(ln 3 / 3)
    # = 2.0303; the choice itself counts t = 4: a 2.1651, b 2.1796 -> b again
    assert ucb.score("a") == pytest.approx(1.98230, abs=1e-4)
    assert ucb.score("b") == pytest.approx(2.03030, abs=1e-4)
    assert ucb.choose() == "b"


def test_an_arm_is_kept_for_its_cooldown():
    ucb = UCB(("a", "b", "c"), cooldown=2, cold_start=True)
    seen = []
    for _ in range(6):
        seen.append(ucb.choose())
        ucb.update(0.5)
    assert seen == ["a", "a", "b", "b", "c", "c"]


def test_pa_sps_bandit_tries_every_predictor_and_all_of_them_observe():
    topo = topology.load("twitter")
    policy = make_policy("pa-sps:bandit", topo, retrain_every=50)
    assert isinstance(policy, PASPSBandit) and policy.name == "pa-sps:bandit"
    policy.window = 1
    # the authors' earlier mab.go: a cold start, each arm kept two windows
    policy.selector = UCB(tuple(policy.selector.arms), cooldown=2, cold_start=True)
    policy.predictor.chosen = policy.selector.choose()  # type: ignore[attr-defined]
    policy.choices[:] = [(0, policy.predictor.chosen)]  # type: ignore[attr-defined]
    for k in range(12):
        policy.analyze(chain_stats(k, 100.0 + k))
    arms = [a for _, a in policy.choices]
    # cold start, each kept two windows: basic, lr, fft, ann, rf
    assert arms[:10] == ["basic", "basic", "lr", "lr", "fft", "fft", "ann", "ann", "rf", "rf"]
    # every member saw every interval, so the next chosen one forecasts from all of it
    assert policy.predictor.members["rf"].predict() > 0  # type: ignore[attr-defined]
    assert all(len(p._samples) == 12 for p in policy.predictor.members.values())  # type: ignore[attr-defined]
