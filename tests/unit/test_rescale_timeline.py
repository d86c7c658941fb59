"""The rescale timeline's arithmetic, on hand-made changes and statistics."""

import pytest

from elastic_sps.io.rescale_timeline import Rescale, histogram, summary, with_recovery

pytestmark = pytest.mark.unit


def change(decided: float, effect: float, op: str = "a") -> Rescale:
    return Rescale(op, "interval-1", 1, 4, decided, decided + 0.05, effect)


def interval(k: int, received: float, processed: float) -> dict:
    return {
        "interval": k,
        "td": 1.0,
        "operators": {"a": {"received": received, "processed": processed}},
    }


def test_recovery_is_the_end_of_the_first_interval_after_the_effect_that_keeps_up():
    # decided at 100.2, effect at 100.9; interval 100 ([100, 101)) ends after the effect but
    # processes 50 of 100 (0.5); interval 101 processes 85 of 100 (< 90 %); interval 102
    # 95 of 100: recovered at 103.0, 2.8 s after the decision; the effect took 0.7 s.
    stats = [interval(99, 100, 100), interval(100, 100, 50), interval(101, 100, 85)]
    stats.append(interval(102, 100, 95))
    (c,) = with_recovery([change(100.2, 100.9)], stats)
    assert c.recovered_at == 103.0
    assert c.decision_to_effect_s == pytest.approx(0.7)
    assert c.decision_to_recovery_s == pytest.approx(2.8)


def test_a_change_that_never_recovers_is_counted_not_hidden():
    (c,) = with_recovery([change(10.0, 10.5)], [interval(10, 100, 10), interval(11, 100, 20)])
    assert c.recovered_at is None and c.decision_to_recovery_s is None
    assert summary([c])["not_recovered"] == 1


def test_summary_and_histogram():
    # effects after 0.2, 0.4, 0.6, 1.5 s: median 0.5; p99 by linear interpolation
    # 0.6 + 0.97 * (1.5 - 0.6) = 1.473
    changes = [change(0.0, e) for e in (0.2, 0.4, 0.6, 1.5)]
    s = summary(changes)
    assert s["changes"] == 4
    assert s["decision_to_effect_s"] == {"median": 0.5, "p99": 1.473}
    assert s["decision_to_recovery_s"] == {"median": None, "p99": None}
    buckets, total = histogram(changes)
    assert dict(buckets) == {
        "0.1": 0.0,
        "0.25": 1.0,
        "0.5": 2.0,
        "1.0": 3.0,
        "2.0": 4.0,
        "5.0": 4.0,
        "10.0": 4.0,
        "+Inf": 4.0,
    }
    assert total == pytest.approx(2.7)
