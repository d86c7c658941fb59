"""λ_G by arrival time, and the live-versus-simulated comparison's arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

from elastic_sps.io.arrivals import ArrivalCounts
from elastic_sps.services.ensemble.forecast import Scenario, arrivals_per_interval
from elastic_sps.services.ensemble.live_compare import gap
from elastic_sps.services.ensemble.report import input_error

pytestmark = pytest.mark.unit


def test_arrivals_are_counted_in_the_interval_they_arrived_in_not_when_handled():
    counts = ArrivalCounts(td=1.0, grace_s=0.25)
    # a batch handled at 12.1 s holds 3 events that arrived in interval 11 and 2 in 12
    for at in (11.2, 11.5, 11.99, 12.0, 12.05):
        counts.add(at, "received")
    counts.caught_up(13.3)
    assert counts.due(12.2) == []  # interval 11 ends at 12.0: grace until 12.25
    assert counts.due(12.3) == [(11, {"received": 3})]
    assert counts.due(13.3) == [(12, {"received": 2})]


def test_an_interval_waits_until_the_ingress_has_read_past_its_end():
    """The ingress lags its topic: at 12.3 s it has read only what was sent before
    11.8 s, so interval 11 (ends 12.0) stays open; a read that began at 12.4 s and left
    nothing waiting lets it go; interval 12 goes 1.5 s after its end whatever was read."""
    counts = ArrivalCounts(td=1.0, grace_s=0.25, max_wait_s=1.5)
    counts.add(11.5, "received")
    counts.add(12.5, "received")
    counts.caught_up(11.8)
    assert counts.due(12.3) == []
    counts.add(11.9, "received")  # read late, still counted in its own interval
    counts.caught_up(12.4)
    assert counts.due(12.5) == [(11, {"received": 2})]
    assert counts.due(14.4) == []
    assert counts.due(14.5) == [(12, {"received": 1})]


def test_input_error_is_the_mean_relative_error_per_interval():
    stats = [{"interval": 5, "input_events": 95.0}, {"interval": 6, "input_events": 200.0}]
    # interval 5: |95 - 100| / 100 = 0.05; interval 6: exact; mean 0.025
    assert input_error(stats, {5: 100, 6: 200}) == pytest.approx(0.025)


def test_the_simulator_sees_the_same_events_the_replay_sends():
    sc = Scenario("twitter", "short-spikes", duration=60, peak_rate=1000.0)
    arrivals = arrivals_per_interval(sc)
    assert len(arrivals) == 60
    assert arrivals.max() <= 1000.0 + 1e-6  # the peak, summed over ten 100 ms ticks


def test_gap_reports_differences_latency_ratio_and_replica_correlation():
    live = {
        "saved_resources": 0.5,
        "throughput_degradation": 0.1,
        "processed_ratio": 1.0,
        "latency_ms": 900.0,
        "rescales": 12,
    }
    sim = {
        "saved_resources": 0.6,
        "throughput_degradation": 0.05,
        "processed_ratio": 1.0,
        "latency_ms": 300.0,
        "rescales": 10,
    }
    g = gap(live, sim, [4, 6, 8, 6], [4, 5, 8, 7])
    assert g["saved_resources"] == pytest.approx(-0.1)
    assert g["rescales"] == 2
    assert g["latency_ratio"] == pytest.approx(3.0)
    assert g["replicas_correlation"] == pytest.approx(np.corrcoef([4, 6, 8, 6], [4, 5, 8, 7])[0, 1])


def test_gap_finds_how_many_intervals_the_live_series_trails_the_forecast():
    """The live series is the forecast two intervals late: shifted back by 2 it matches
    exactly (correlation 1), unshifted it does not."""
    sim = [4, 4, 8, 12, 8, 4, 4, 4, 10, 4, 4, 4]
    live = [4, 4, *sim[:-2]]
    g = gap({}, {}, live, sim)
    assert g["replicas_best_lag"] == 2
    assert g["replicas_correlation_at_best_lag"] == pytest.approx(1.0)
    assert g["replicas_correlation"] < 0.5


def test_live_figures_cover_the_replay_intervals_only():
    """Warm-up (interval 1) and drain (interval 5) are outside the replay's 2..4. twitter:
    pool 32; active totals 4, 8, 16 -> saved 1 - (28 / 3) / 32 = 0.708; a rescale is an
    operator-interval whose count changed: 4 operators x 2 changes."""
    from elastic_sps.model import topology
    from elastic_sps.services.ensemble.live_compare import live_figures

    topo = topology.load("twitter")

    def interval(k, active, inp, sink):
        ops = {n: {"active_replicas": active, "processed": sink} for n in topo.names}
        return {"interval": k, "input_events": inp, "operators": ops}

    stats = [
        interval(1, 8, 50, 50),
        interval(2, 1, 100, 100),
        interval(3, 2, 200, 150),
        interval(4, 4, 100, 150),
        interval(5, 8, 0, 10),
    ]
    fig, series = live_figures(topo, {"processed_ratio": 1.0}, stats, {2: 100, 3: 200, 4: 100})
    assert series == [4, 8, 16]
    assert fig["saved_resources"] == pytest.approx(1 - (28 / 3) / 32)
    assert fig["rescales"] == 8  # 4 operators, each changed twice
    # |100-100|/100, |200-150|/200, |100-150|/100 -> (0 + 0.25 + 0.5) / 3
    assert fig["throughput_degradation"] == pytest.approx(0.25)


def test_the_warm_up_runs_at_a_quarter_of_the_peak_for_at_least_a_second():
    """10 s at a 640 events/s peak: 100 ticks of 100 ms at 160 events/s (16 a tick); a
    tiny warm-up still lasts a second at 5 events a tick."""
    from elastic_sps.services.ensemble.replay import warmup_ticks

    ticks = warmup_ticks(10.0, 640.0)
    assert len(ticks) == 100 and set(ticks.tolist()) == {16.0}
    short = warmup_ticks(0.05, 10.0)
    assert len(short) == 10 and set(short.tolist()) == {5.0}


def test_a_run_is_scored_with_the_bandits_reward_against_the_goal():
    """Latency 1 s, degradation 0.1, saved 0.4, goal 5 s (the authors' newest bounds: 0.10
    degradation, 0.5 saving): 0.34 (1 - 1/5) + 0.33 (1 - 0.1/0.10) + 0.33 (0.4/0.5) =
    0.272 + 0 + 0.264 = 0.536. With a 2 s goal the latency term is 0.34 (1 - 1/2) =
    0.17: 0.434. A figure missing: no score."""
    from elastic_sps.services.ensemble.live_compare import run_reward

    run = {"latency_ms": 1000.0, "throughput_degradation": 0.1, "saved_resources": 0.4}
    assert run_reward(run) == pytest.approx(0.536)
    assert run_reward(run, goal_s=2.0) == pytest.approx(0.434)
    assert run_reward({**run, "latency_ms": None}) is None
