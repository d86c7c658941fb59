"""The run folder's account of a keyed resize: the move the dataplane recorded and the
longest wait of a moved partition, matched to its change."""

import pytest

from elastic_sps.services.ensemble import state_moves

pytestmark = pytest.mark.unit


def test_each_keyed_change_gets_its_move_and_its_longest_pause():
    rows = [
        {"operator": "total", "before": 1, "after": 4, "effect_at": 100.0},
        {"operator": "total", "before": 4, "after": 2, "effect_at": 110.0},
        {"operator": "parse", "before": 1, "after": 2, "effect_at": 100.0},
    ]
    moves = [
        {"operator": "total", "from": 1, "to": 4, "partitions": [2, 3], "key_groups": 64,
         "state_bytes": 9000, "at": 100.1},
        {"operator": "total", "from": 4, "to": 2, "partitions": [2], "key_groups": 32,
         "state_bytes": 4000, "at": 110.05},
    ]  # fmt: skip
    pauses = {
        "total": [
            {"partition": 2, "pause_s": 0.3, "at": 100.5},
            {"partition": 3, "pause_s": 0.7, "at": 100.6},
            {"partition": 0, "pause_s": 5.0, "at": 100.6},  # did not move: not counted
            {"partition": 2, "pause_s": 0.2, "at": 110.4},  # the second change's
        ]
    }
    out = state_moves.attach(rows, moves, pauses)
    assert [r.get("pause_s") for r in out] == [0.7, 0.2, None]
    assert out[0]["moved_partitions"] == [2, 3] and "moved_partitions" not in out[2]
    s = state_moves.summary(out)
    assert (s["moves"], s["key_groups_moved"], s["state_bytes_moved"]) == (2, 96, 13000)
    assert s["pause_s"]["max"] == 0.7 and s["pause_s"]["median"] == 0.45
