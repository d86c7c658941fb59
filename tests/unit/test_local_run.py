"""The in-process runner (``elastic_sps.pipeline.local_run``) on hand-made topologies: keyed
state, windows closing by the watermark and at the end, routing, filtering, dead letters."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_sps.model.topology import from_dict
from elastic_sps.pipeline.failures import OperatorFailing
from elastic_sps.pipeline.local_run import run_local

pytestmark = pytest.mark.unit


def split(ev: dict[str, Any], ctx: Any) -> list[tuple[str | None, Any]]:
    """Negative amounts to ``refunds``, zero filtered out, the rest to ``totals``."""
    if ev["v"] == 0:
        return []
    return [("refunds" if ev["v"] < 0 else "totals", ev)]


def running_total(ev: dict[str, Any], ctx: Any) -> list[tuple[str | None, Any]]:
    ctx.state["total"] = ctx.state.get("total", 0) + ev["v"]
    return [(None, {"k": ctx.key, "total": ctx.state["total"]})]


def strict(ev: dict[str, Any], ctx: Any) -> list[tuple[str | None, Any]]:
    if ev["v"] < -5:
        raise ValueError(f"refund {ev['v']} too large")
    return [(None, ev)]


def wrong_shape(ev: dict[str, Any], ctx: Any) -> Any:
    return ev


def _topo(refunds: dict[str, Any] | None = None) -> Any:
    return from_dict(
        {
            "name": "shop",
            "source": {"id": "field:id", "time": "field:t"},
            "operators": [
                {"name": "split", "code": f"{__name__}:split"},
                {
                    "name": "totals",
                    "code": f"{__name__}:running_total",
                    "key": "field:k",
                    "output": "totals",
                },
                {"name": "refunds", "code": f"{__name__}:strict", **(refunds or {})},
                {
                    "name": "per_10s",
                    "window": {"tumbling_s": 10},
                    "key": "field:k",
                    "output": "counts",
                },
            ],
            "edges": [
                {"from": "source", "to": "split"},
                {"from": "split", "to": "totals"},
                {"from": "split", "to": "refunds"},
                {"from": "refunds", "to": "per_10s"},
            ],
        },
        "shop.yaml",
    )


EVENTS = [
    {"id": "e1", "k": "a", "v": 5, "t": 100},
    {"id": "e2", "k": "b", "v": -2, "t": 101},
    {"id": "e3", "k": "a", "v": 0, "t": 102},
    {"id": "e4", "k": "a", "v": 7, "t": 103},
    {"id": "e5", "k": "b", "v": -9, "t": 104},
    {"id": "e6", "k": "b", "v": -1, "t": 111},  # closes [100, 110)
    {"id": "e7", "k": "a", "v": -3, "t": 109},  # its window closed: late
    {"id": "e8", "k": "c", "v": 4},  # no time: dead-lettered at the source
]


def test_keyed_state_routing_filtering_windows_and_dead_letters():
    run = run_local(_topo(), EVENTS)
    assert run.events == 8
    # per key running totals: a 5 then 12 (e3 filtered); nothing of b (refunds only)
    assert run.outputs["totals"] == [{"k": "a", "total": 5}, {"k": "a", "total": 12}]
    assert run.state["totals"] == {"a": {"total": 12}}
    # refunds per key and 10 s: [100, 110) holds e2 only (e5 raised), closed by e6's time;
    # [110, 120) holds e6, closed at the end of the input
    assert run.outputs["counts"] == [
        {"key": "b", "start": 100, "end": 110, "value": 1},
        {"key": "b", "start": 110, "end": 120, "value": 1},
    ]
    assert run.late == [("per_10s", "e7")]
    assert [(d.operator, d.event_id, d.reason) for d in run.dead_letters] == [
        ("refunds", "e5", "ValueError: refund -9 too large"),
        ("source", "local/7", "no event time at 't'"),
    ]
    assert "raise ValueError" in run.dead_letters[0].frames


def test_on_error_fail_stops_the_run_with_the_cause():
    with pytest.raises(OperatorFailing, match="'refunds' raised ValueError: refund -9"):
        run_local(_topo({"on_error": "fail"}), EVENTS)


def test_a_wrong_return_shape_is_a_dead_letter_naming_it():
    run = run_local(_topo({"code": f"{__name__}:wrong_shape"}), EVENTS[:2])
    [letter] = run.dead_letters
    assert letter.operator == "refunds" and letter.reason.startswith("TypeError: operator")
    assert "returned dict" in letter.reason


def test_a_sink_without_output_counts_what_it_drops():
    topo = from_dict(
        {
            "operators": [{"name": "a", "code": f"{__name__}:strict"}],
            "edges": [{"from": "source", "to": "a"}],
        },
        "t.yaml",
    )
    run = run_local(topo, [{"v": 1}, {"v": 2}])
    assert run.outputs == {} and run.dropped == {"a": 2}


def test_an_operator_with_successors_writes_its_own_output_topic_too():
    """A window's results go to its topic and on to a keyed ledger: [0, 10) holds x's
    events at 1 and 4, [10, 20) x's at 12; the ledger sums the counts."""
    topo = from_dict(
        {
            "name": "two",
            "source": {"time": "field:t"},
            "operators": [
                {
                    "name": "count",
                    "key": "field:k",
                    "window": {"tumbling_s": 10},
                    "et_ms": 1,
                    "output": "counts",
                },
                {
                    "name": "ledger",
                    "key": "field:key",
                    "et_ms": 1,
                    "output": "ledger",
                    "code": "tests.support.engine_ops:sum_values",
                },
            ],
            "edges": [{"from": "source", "to": "count"}, {"from": "count", "to": "ledger"}],
        }
    )
    run = run_local(topo, [{"k": "x", "t": t} for t in (1, 4, 12)])
    assert [(w["start"], w["value"]) for w in run.outputs["counts"]] == [(0.0, 2), (10.0, 1)]
    assert run.outputs["ledger"] == [{"key": "x", "sum": 2}, {"key": "x", "sum": 3}]


def test_records_the_source_cannot_read_are_dead_lettered_with_what_is_wrong(tmp_path):
    """As the live ingress: a line that is not JSON, and a JSON array where the source
    reads its time from a field, each dead-lettered at the source with its reason."""
    from elastic_sps.pipeline.samples import read_events

    events = tmp_path / "ev.jsonl"
    events.write_text('{"k": "x", "t": 1}\nnot json\n[1, 2]\n')
    topo = from_dict(
        {
            "source": {"time": "field:t"},
            "operators": [{"name": "a", "et_ms": 1, "output": "out"}],
            "edges": [{"from": "source", "to": "a"}],
        }
    )
    run = run_local(topo, read_events(events))
    assert run.events == 3 and run.received == {"a": 1}
    reasons = [d.reason for d in run.dead_letters]
    assert reasons[0].startswith("not JSON")
    assert (
        reasons[1] == "a JSON list, not an object: the source reads its id, time or key from fields"
    )


def _join(ttl: float | None) -> Any:
    op = {
        "name": "join",
        "key": "field:imp",
        "et_ms": 1,
        "output": "matches",
        "code": "tests.support.engine_ops:interval_join",
    }
    if ttl is not None:
        op["state_ttl_s"] = ttl
    return from_dict(
        {
            "source": {"time": "field:t"},
            "operators": [op],
            "edges": [{"from": "source", "to": "join"}],
        }
    )


def test_a_keys_state_expires_after_state_ttl_s_of_event_time():
    """Impression i1 at 0, i2 at 20; a click on i1 at 5 matches; the watermark 35
    (i3) passes i1's 0 + 30: its state is gone, so i1's click at 36 does not match,
    while i2's (20 + 30 = 50 not passed) at 36 does. At the end i2 and i3 are kept."""
    events = [
        {"kind": "impression", "imp": "i1", "t": 0},
        {"kind": "click", "imp": "i1", "t": 5},
        {"kind": "impression", "imp": "i2", "t": 20},
        {"kind": "impression", "imp": "i3", "t": 35},
        {"kind": "click", "imp": "i1", "t": 36},
        {"kind": "click", "imp": "i2", "t": 36},
    ]
    run = run_local(_join(30), events)
    assert run.outputs["matches"] == [
        {"impression": "i1", "after_s": 5},
        {"impression": "i2", "after_s": 16},
    ]
    assert run.expired_state == {"join": 1}
    assert run.state["join"] == {"i2": {"shown_at": 20}, "i3": {"shown_at": 35}}
    without = run_local(_join(None), events)
    assert len(without.outputs["matches"]) == 3 and without.expired_state == {}


def test_a_state_ttl_goes_with_a_keyed_operators_state_only():
    from elastic_sps.model.topology import TopologyError

    with pytest.raises(TopologyError, match="state_ttl_s goes with a keyed operator"):
        from_dict(
            {
                "operators": [{"name": "a", "et_ms": 1, "state_ttl_s": 5}],
                "edges": [{"from": "source", "to": "a"}],
            }
        )


def test_a_keyed_stage_after_two_fan_outs_counts_every_output_once():
    """``halves`` makes two events of each, and again: four reach ``total``, each with
    its own id (local/0, local/0/again.1, local/0/halves.1, local/0/halves.1/again.1)."""
    ops = "tests.support.engine_ops"
    topo = from_dict(
        {
            "name": "fan-outs",
            "operators": [
                {"name": "halves", "code": f"{ops}:split", "et_ms": 1.0},
                {"name": "again", "code": f"{ops}:split", "et_ms": 1.0},
                {"name": "total", "code": f"{__name__}:running_total", "key": "field:k",
                 "et_ms": 1.0, "output": "totals"},
            ],
            "edges": [
                {"from": "source", "to": "halves"},
                {"from": "halves", "to": "again"},
                {"from": "again", "to": "total"},
            ],
        }
    )  # fmt: skip
    run = run_local(topo, [{"k": "a", "v": 1}, {"k": "b", "v": 5}])
    assert run.repeats == {}
    assert run.state["total"] == {"a": {"total": 4}, "b": {"total": 20}}
