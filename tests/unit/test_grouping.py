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


class _CountingView:
    """A ``RoutingView`` that says every successor has 2 active replicas, counting reads."""

    def __init__(self, topo: object) -> None:
        self.topo, self.reads = topo, []

    def read(self, successor: str) -> tuple[int, list[float]]:
        self.reads.append(successor)
        return 2, [0.0, 0.0]

    def router(self, successor: str, concurrency: int = 1, start: int = 0) -> LoadAwareRouter:
        return LoadAwareRouter(0.001, 1.0, [0.0, 0.0], concurrency=concurrency, start=start)


def test_a_keyed_successor_goes_by_key_and_its_count_is_never_read(tmp_path):
    from elastic_sps.control.routing import Routers
    from elastic_sps.model import topology

    path = tmp_path / "t.yaml"
    path.write_text(
        "name: t\noperators:\n"
        "  - {name: a, et_ms: 1, max_replicas: 2}\n"
        "  - {name: keyed, key: 'field:k', et_ms: 1, max_replicas: 4}\n"
        "  - {name: plain, et_ms: 1, max_replicas: 2}\n"
        "edges:\n  - {from: source, to: a}\n  - {from: a, to: keyed}\n  - {from: a, to: plain}\n"
    )
    view = _CountingView(topology.load(path))
    routers = Routers(view, ["keyed", "plain"])
    routers.refresh()
    assert view.reads == ["plain"]  # the code before read "keyed" too, every 0.2 s
    # crc32("k1") % 128 = 41: group 41 of 128 is in partition 41 * 4 // 128 = 1 of 4
    assert routers.choose("keyed", {"k": "k1"}) == 1
    assert routers.choose("plain", {"k": "k1"}) in (0, 1)
