"""Keyed routing and event-time windows, hand-checked: key -> key group -> partition ->
owner, window assignment, the watermark over inputs, and when an event is late."""

from __future__ import annotations

import pytest

from elastic_sps.model import keyed, topology
from elastic_sps.model.topology import TopologyError
from elastic_sps.model.windows import WindowError, WindowSpec

pytestmark = pytest.mark.unit


def test_a_key_goes_to_its_group_partition_and_owner():
    """crc32("alice") = 663,665,735 = 128 x 5,184,888 + 71: group 71 of 128; 4 partitions
    hold 32 groups each: partition 71 // 32 = 2; with 1, 3 and 4 replicas its owner is
    2 x 1 // 4 = 0, 2 x 3 // 4 = 1 and 2 x 4 // 4 = 2."""
    assert keyed.key_group("alice", 128) == 71
    assert keyed.partition_of_key("alice", 128, 4) == 2
    assert [keyed.owner(2, 4, n) for n in (1, 3, 4)] == [0, 1, 2]
    assert list(keyed.groups_of_partition(2, 128, 4)) == list(range(64, 96))


def test_owners_take_contiguous_partition_ranges_and_a_resize_moves_only_some():
    assert keyed.owners(range(8), 8, 3) == {0: [0, 1, 2], 1: [3, 4, 5], 2: [6, 7]}
    # 1 -> 4 replicas of 8 partitions: 0-1 stay with replica 0, 2-7 move
    assert keyed.moved_partitions(8, 1, 4) == [2, 3, 4, 5, 6, 7]
    # 4 -> 2: owners p // 2 = 0 0 1 1 2 2 3 3 become p // 4 = 0 0 0 0 1 1 1 1
    assert keyed.moved_partitions(8, 4, 2) == [2, 3, 4, 5, 6, 7]
    assert keyed.moved_partitions(8, 2, 2) == []


def test_tumbling_hopping_and_session_windows_of_a_time():
    assert WindowSpec.parse({"tumbling_s": 10}).assign(23.5) == [(20, 30)]
    hop = WindowSpec.parse({"hopping_s": 10, "slide_s": 2})
    assert hop.assign(23.5) == [(14, 24), (16, 26), (18, 28), (20, 30), (22, 32)]
    assert hop.assign(20) == [(12, 22), (14, 24), (16, 26), (18, 28), (20, 30)]
    assert WindowSpec.parse({"session_gap_s": 5}).assign(3) == [(3, 8)]
    assert WindowSpec.parse({"tumbling_s": 0.1}).assign(0.35) == [(0.3, 0.4)]


def test_a_window_closes_when_the_watermark_passes_its_end_plus_the_lateness():
    tumbling = WindowSpec.parse({"tumbling_s": 10})
    assert not tumbling.closed(30, None)  # no watermark yet: nothing closes
    assert not tumbling.closed(30, 29.9) and tumbling.closed(30, 30)
    late_ok = WindowSpec.parse({"tumbling_s": 10, "lateness_s": 5})
    assert not late_ok.closed(30, 34) and late_ok.closed(30, 35)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"tumbling_s": 10, "session_gap_s": 3}, "exactly one of"),
        ({"hopping_s": 10}, "needs slide_s"),
        ({"hopping_s": 10, "slide_s": 20}, "longer than"),
        ({"tumbling_s": -1}, "positive"),
        ({"tumbling_s": 10, "lateness_s": -1}, "lateness_s"),
    ],
)
def test_a_bad_window_is_refused_with_its_reason(doc, message):
    with pytest.raises(WindowError, match=message):
        WindowSpec.parse(doc)


def _topo(op: dict) -> topology.Topology:
    return topology.from_dict({"operators": [op], "edges": [{"from": "source", "to": op["name"]}]})


def test_keyed_and_window_operators_in_a_topology():
    t = _topo({"name": "total", "et_ms": 1, "key": "field:user.id", "max_replicas": 4})
    op = t["total"]
    assert op.stateful and op.key_path == (("user", "id"),) and op.key_groups == 128
    assert op.chain  # it may head a chain of its stateless successors (test_chaining)
    w = _topo({"name": "count", "et_ms": 1, "window": {"tumbling_s": 5}, "max_replicas": 4})
    assert w["count"].window == WindowSpec("tumbling", 5, 5)
    assert (w["count"].min_replicas, w["count"].max_replicas) == (1, 1)  # over all events
    again = topology.from_dict(t.to_dict())
    assert again["total"].key == "field:user.id"
    with pytest.raises(TopologyError, match="key must be 'field:<path>'"):
        _topo({"name": "x", "et_ms": 1, "key": "user.id"})
    with pytest.raises(TopologyError, match="key_groups 2 is below max_replicas 4"):
        _topo({"name": "x", "et_ms": 1, "key": "field:k", "key_groups": 2, "max_replicas": 4})
    with pytest.raises(TopologyError, match="slide_s"):
        _topo({"name": "x", "et_ms": 1, "window": {"hopping_s": 4}})


def test_the_simulator_idles_a_keyed_operators_moved_partitions_for_the_pause():
    """Pool 4, 1 -> 4 replicas: partitions 1-3 move (3/4 of them); a 0.25 s pause in a
    1 s interval idles 3/4 x 4 x 0.25 = 0.75 replicas; nothing without a change."""
    from elastic_sps.model.engine import EngineModel, keyed_move_loss

    engine = EngineModel(keyed_move_s=0.25)
    assert keyed_move_loss(4, 1, 4, engine, td=1.0) == pytest.approx(0.75)
    assert keyed_move_loss(4, 2, 2, engine, td=1.0) == 0.0
    per_byte = EngineModel(keyed_move_s=0.1, keyed_move_s_per_byte=1e-6)
    # 4 -> 2: owners 0 1 2 3 become 0 0 1 1, partitions 1-3 move (3/4); pause
    # 0.1 + 100,000 x 1e-6 = 0.2 s: 3/4 x 2 x 0.2 = 0.3 replicas
    assert keyed_move_loss(4, 4, 2, per_byte, td=1.0, state_bytes=100_000) == pytest.approx(0.3)
