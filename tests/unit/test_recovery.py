"""shared/simulation/recovery.py on hand-made series (td = 1 s, the fault at t = 20.4 s)."""

import pytest

from elastic_sps.simulation.recovery import Interval, recovery

pytestmark = pytest.mark.unit


def steady(lo: int, hi: int, latency: float = 400.0, backlog: float = 50.0) -> list[Interval]:
    return [Interval(k, 100.0, latency, backlog) for k in range(lo, hi)]


def test_band_from_the_ten_intervals_before_the_fault() -> None:
    # pre-fault (10..19): highest latency 400 ms, highest backlog 50, mean input 100:
    # band = 1.5 × 400 + 250 = 850 ms and 1.5 × 50 + 100 = 175 events
    series = steady(0, 30)
    r = recovery(series, 1.0, 20.4)
    assert r.band is not None
    assert r.band.latency_ms == 850.0
    assert r.band.backlog == 175.0
    assert (r.left_band, r.recovered_s) == (False, 0.0)


def test_recovered_at_the_start_of_three_in_band_intervals() -> None:
    # latency out of band in 20-24 (a dead service: 5,000 ms, backlog 900),
    # 25 back, 26 out again (900 ms > 850), 27, 28, 29 in band: recovered at 27 s
    hit = [Interval(k, 100.0, 5_000.0, 900.0) for k in range(20, 25)]
    wobble = [Interval(25, 100.0, 800.0, 100.0), Interval(26, 100.0, 900.0, 100.0)]
    series = steady(0, 20) + hit + wobble + steady(27, 40)
    r = recovery(series, 1.0, 20.4)
    assert r.left_band
    assert r.recovered_s == pytest.approx(27 - 20.4)


def test_backlog_alone_leaves_the_band() -> None:
    series = [*steady(0, 20), Interval(20, 100.0, 400.0, 176.0), *steady(21, 30)]
    r = recovery(series, 1.0, 20.4)
    assert r.left_band
    assert r.recovered_s == pytest.approx(21 - 20.4)


def test_an_interval_without_completions_is_judged_by_its_backlog() -> None:
    # a dead dataplane: nothing completes and the backlog passes 175; one quiet interval
    # with a normal backlog (40) is no fault
    dead = [Interval(k, 100.0, None, 400.0) for k in range(20, 23)]
    r = recovery([*steady(0, 20), *dead, *steady(23, 30)], 1.0, 20.4)
    assert r.recovered_s == pytest.approx(23 - 20.4)
    quiet = [*steady(0, 20), Interval(20, 100.0, None, 40.0), *steady(21, 30)]
    assert recovery(quiet, 1.0, 20.4).left_band is False


def test_not_back_by_the_end_is_none_and_an_idle_tail_is_in_band() -> None:
    stuck = [Interval(k, 100.0, 3_000.0, 500.0) for k in range(20, 30)]
    assert recovery(steady(0, 20) + stuck, 1.0, 20.4).recovered_s is None
    idle = [Interval(k, 0.0, None, 0.0) for k in range(21, 25)]
    r = recovery([*steady(0, 20), Interval(20, 100.0, 3000.0, 0.0), *idle], 1.0, 20.4)
    assert r.recovered_s == pytest.approx(21 - 20.4)


def test_no_fault_measures_nothing() -> None:
    r = recovery(steady(0, 30), 1.0, None)
    assert (r.band, r.left_band, r.recovered_s) == (None, False, None)


def test_the_monitors_records_are_read_as_published():
    from elastic_sps.contracts.stats import StatsRecord
    from elastic_sps.simulation.recovery import intervals_from_stats

    assert "latency_ms_mean" in StatsRecord.model_fields
    rec = {
        "interval": 7,
        "input_events": 100,
        "latency_ms_mean": 420.0,
        "operators": {"a": {"queued": 3}, "b": {"queued": 4}},
    }
    assert intervals_from_stats([rec]) == [Interval(7, 100.0, 420.0, 7.0)]
