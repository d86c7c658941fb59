import pytest

from elastic_sps.control.grouping import LoadAwareRouter, utilisation

pytestmark = pytest.mark.unit


def test_eq1():
    assert utilisation(processed=250, et_s=0.002, td=1.0) == pytest.approx(0.5)


def test_least_utilised_first_then_charged():
    r = LoadAwareRouter(et_s=0.125, td=1.0, utilisations=[0.5, 0.25, 0.375])
    # replica 1 rises to 0.375 and wins the tie with replica 2 (first minimum, line 3's <),
    # then replica 2, then all are at 0.5 and replica 0 is first.
    assert [r.choose() for _ in range(4)] == [1, 1, 2, 0]


def test_equal_load_is_round_robin_like():
    r = LoadAwareRouter(et_s=0.01, td=1.0, utilisations=[0.0, 0.0, 0.0])
    picks = [r.choose() for _ in range(6)]
    assert picks == [0, 1, 2, 0, 1, 2]


def test_saturated_falls_back_to_round_robin():
    r = LoadAwareRouter(et_s=0.5, td=1.0, utilisations=[1.0, 1.0])
    assert [r.choose() for _ in range(4)] == [0, 1, 0, 1]


def test_refresh_with_fewer_replicas():
    r = LoadAwareRouter(et_s=0.5, td=1.0, utilisations=[1.0, 1.0, 1.0])
    r.choose(), r.choose(), r.choose()
    r.refresh([0.2])
    assert r.choose() == 0
    with pytest.raises(ValueError):
        r.refresh([])
