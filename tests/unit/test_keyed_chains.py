"""A keyed or window operator heading a chain: what fuses (stateless successors, and keyed
ones keyed alike), and the chain at run time on the engine's core with in-memory ports:
the head's state once per event, a stateless tail seeing none, a keyed member its own
state of the head's key, a tail that raises leaving no state write behind, a fired window
through the members after it, the head's `state_ttl_s` on the head's keys."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from elastic_sps.io.watermarks import Declaration
from elastic_sps.model.keyed import key_group
from elastic_sps.model.topology import from_dict
from elastic_sps.pipeline.chain import MemberFailed, open_runnable
from elastic_sps.pipeline.engine import Event, OperatorCore
from elastic_sps.pipeline.local_store import MemoryStore
from elastic_sps.pipeline.operators import Context

pytestmark = pytest.mark.unit

OPS = "tests.support.engine_ops"


def doc(*ops: dict, edges: list[tuple[str, str]]) -> dict:
    return {
        "name": "k",
        "chain": True,
        "operators": list(ops),
        "edges": [{"from": a, "to": b} for a, b in edges],
    }


def opened(document: dict, name: str) -> tuple[OperatorCore, MemoryStore, Context]:
    """Chain ``name`` of ``document`` on the engine's core, with an in-memory store."""
    t = from_dict(document)
    return (
        OperatorCore(t, name, open_runnable(t, name, Context(name))),
        MemoryStore(),
        Context(name),
    )


def sender(core: OperatorCore, store: MemoryStore, ctx: Context, shape: Callable) -> Callable:
    """``send(id, value)``: one event of key ``a`` in, each output ``shape``d out, then
    ``("failed", member, input id)`` for each member input that raised, or
    ``["repeat"]`` for an id the partition applied already."""

    def send(event_id: str, value: int) -> list:
        ev = Event(event_id, {"key": "a", "value": value}, 1.0)
        if core.repeat(ev, store):
            return ["repeat"]
        failed: list[MemberFailed] = []
        out = [shape(*o) for o in core.apply(ev, ctx, store, failed)]
        return out + [("failed", f.operator, f.event_id) for f in failed]

    return send


def keyed_sum_then_check() -> dict:
    return doc(
        {"name": "sum", "et_ms": 2.0, "key": "field:key", "code": f"{OPS}:sum_values",
         "max_replicas": 4, "state_ttl_s": 60},
        {"name": "check", "et_ms": 0.5, "code": f"{OPS}:checked_total", "max_replicas": 4},
        {"name": "keyed_after", "et_ms": 1.0, "key": "field:key", "max_replicas": 4},
        edges=[("source", "sum"), ("sum", "check"), ("check", "keyed_after")],
    )  # fmt: skip


def test_a_keyed_operator_heads_a_chain_of_its_stateless_successors():
    t = from_dict(keyed_sum_then_check())
    # keyed as the head is, but the head keeps state_ttl_s: apart (``same_key``)
    assert t.names == ("sum..check", "keyed_after")
    head = t["sum..check"]
    assert head.stateful and head.key == "field:key" and head.key_groups == 128
    assert head.state_ttl_s == 60 and head.window is None
    assert head.et_ms == pytest.approx(2.5)  # 2.0 + 0.5 per event entering it


def window_then_filter() -> dict:
    return doc(
        {"name": "pre", "et_ms": 1.0, "max_replicas": 4},
        {"name": "win", "et_ms": 1.0, "key": "field:k", "window": {"tumbling_s": 10},
         "max_replicas": 4},
        {"name": "busy", "et_ms": 0.5, "code": f"{OPS}:busy_windows", "max_replicas": 4},
        edges=[("source", "pre"), ("pre", "win"), ("win", "busy")],
    )  # fmt: skip


def test_a_window_heads_a_chain_of_its_stateless_successors():
    t = from_dict(window_then_filter())
    assert t.names == ("pre", "win..busy")  # nothing chains into the window
    head = t["win..busy"]
    assert head.window is not None and head.window.size_s == 10 and head.key == "field:k"
    assert head.stateful and head.et_ms == pytest.approx(1.5)


def test_a_fired_window_goes_through_the_members_after_it():
    core, store, ctx = opened(window_then_filter(), "win..busy")
    valve = core.valve(store)
    for i, (k, evt) in enumerate([("a", 1), ("a", 2), ("b", 3), ("c", 4), *[("d", 5)] * 6]):
        assert core.apply(Event(f"e{i}", {"k": k}, evt, "pre"), ctx, store, []) == []
    fired = core.declare(valve, Declaration("pre", 0, 4, 10.0), store)
    assert [r.id for r in fired] == []  # three of pre's four partitions have said nothing
    for part in (1, 2, 3):
        fired += core.declare(valve, Declaration("pre", part, 4, 12.0), store)
    assert sorted(r.id for r in fired) == ["a@0", "b@0", "c@0", "d@0"]
    by_id = {r.id: r for r in fired}
    # a counts 2: two outputs, ids from the window's; b and c count 1: dropped
    assert core.fired(by_id["a@0"], ctx, []) == [
        (None, "a@0", {"key": "a", "n": 2, "half": 1}),
        (None, "a@0/busy.1", {"key": "a", "n": 2, "half": 2}),
    ]
    assert core.fired(by_id["b@0"], ctx, []) == []
    failed: list[MemberFailed] = []  # d counts 6: busy raises on it, d@0 alone fails
    assert core.fired(by_id["d@0"], ctx, failed) == []
    assert [(f.operator, f.event_id) for f in failed] == [("busy", "d@0")]
    assert "window d@0.0 counts 6" in str(failed[0].error)


def test_chain_false_on_a_keyed_head_keeps_it_apart():
    apart = keyed_sum_then_check()
    apart["operators"][0]["chain"] = False
    assert from_dict(apart).names == ("sum", "check", "keyed_after")


def test_a_keyed_heads_state_ttl_expires_its_own_keys_in_a_chain():
    """sum (ttl 60) heads sum..check: key a last seen at t=1, b at t=50; the watermark at
    70 passes a's 61, not b's 110: a's state goes, b's stays."""
    core, store, ctx = opened(keyed_sum_then_check(), "sum..check")
    valve = core.valve(store)
    core.apply(Event("e1", {"key": "a", "value": 1}, 1.0), ctx, store, [])
    core.apply(Event("e2", {"key": "b", "value": 2}, 50.0), ctx, store, [])
    core.declare(valve, Declaration("source", 0, 1, 70.0), store)
    assert core.expire(valve, store) == 1
    assert store.state() == {"b": {"sum": 2}}


def test_the_chain_applies_the_heads_state_once_and_its_tail_sees_none():
    core, store, ctx = opened(keyed_sum_then_check(), "sum..check")
    send = sender(core, store, ctx, lambda dst, oid, p: (dst, oid, p["sum"], p["tail_saw"]))

    assert send("e1", 30) == [(None, "e1", 30, ["", {}])]
    assert send("e2", 40) == [(None, "e2", 70, ["", {}])]
    assert send("e2", 40) == ["repeat"]  # the same id again: applied once
    # the tail refuses 120: that input alone fails, the head's write stays (as unchained)
    assert send("e3", 50) == [("failed", "check", "e3")]
    assert store.state() == {"a": {"sum": 120}}
    assert send("e3", 50) == ["repeat"]  # applied once: not failed twice either


def keyed_into_keyed(**tally_extra: object) -> dict:
    return doc(
        {"name": "sum", "et_ms": 2.0, "key": "field:key", "code": f"{OPS}:sum_values",
         "max_replicas": 4},
        {"name": "relabel", "et_ms": 0.5, "code": f"{OPS}:relabel", "max_replicas": 4},
        {"name": "tally", "et_ms": 1.0, "key": "field:key", "code": f"{OPS}:tally",
         "max_replicas": 4, **tally_extra},
        edges=[("source", "sum"), ("sum", "relabel"), ("relabel", "tally")],
    )  # fmt: skip


def test_a_keyed_operator_chains_into_one_keyed_alike():
    t = from_dict(keyed_into_keyed())
    assert t.names == ("sum..tally",)
    assert t["sum..tally"].key == "field:key" and t["sum..tally"].et_ms == pytest.approx(3.5)
    for apart in ({"key": "field:other"}, {"key_groups": 64}, {"chain": False}):
        assert from_dict(keyed_into_keyed(**apart)).names == ("sum..relabel", "tally"), apart


def test_a_keyed_member_keeps_its_own_state_of_the_heads_key_applied_once():
    core, store, ctx = opened(keyed_into_keyed(), "sum..tally")
    send = sender(core, store, ctx, lambda dst, oid, p: p)

    assert send("e1", 5) == [{"key": "a", "n": 1, "last": 5}]
    assert send("e2", 4) == [{"key": "a", "n": 2, "last": 9}]
    assert send("e2", 4) == ["repeat"]  # the chain's effects once: the head's and tally's
    # relabel moves a sum of 13 to key "a'": not this partition's, tally's input fails
    assert send("e3", 4) == [("failed", "tally", "e3")]
    assert store.state() == {"a": {"sum": 13}}  # the head's write stays
    assert store.get("s:tally", key_group("a", 128), "a") == {"n": 2, "last": 9}
    assert send("e4", 1) == [{"key": "a", "n": 3, "last": 14}]


def test_a_keyed_member_that_raises_on_one_input_keeps_its_other_inputs_writes():
    """sum_twice makes halves 1 and 2 of each sum; tally_halves writes, then refuses half
    2 of a sum above 10: e2's half 2 (sum 15) fails alone, its writes undone."""
    doc_ = keyed_into_keyed()
    doc_["operators"][0]["code"] = f"{OPS}:sum_twice"
    doc_["operators"][2]["code"] = f"{OPS}:tally_halves"
    core, store, ctx = opened(doc_, "sum..tally")
    send = sender(core, store, ctx, lambda dst, oid, p: (oid, p["n"], p["seen"]))

    assert send("e1", 5) == [("e1", 1, [1]), ("e1/sum.1", 2, [1, 2])]
    assert send("e2", 10) == [("e2", 3, [1, 2, 1]), ("failed", "tally", "e2/sum.1")]
    assert store.get("s:tally", key_group("a", 128), "a") == {"n": 3, "seen": [1, 2, 1]}
    assert store.state() == {"a": {"sum": 15}}


def test_every_output_of_a_keyed_head_reaches_its_keyed_member_under_the_heads_key():
    doc_ = keyed_into_keyed()
    doc_["operators"][0]["code"] = f"{OPS}:sum_twice"  # two outputs an event
    core, store, ctx = opened(doc_, "sum..tally")
    out = core.apply(Event("e1", {"key": "a", "value": 3}, 1.0), ctx, store, [])
    assert [(i, p["n"]) for _, i, p in out] == [("e1", 1), ("e1/sum.1", 2)]
    assert store.get("s:tally", key_group("a", 128), "a") == {"n": 2, "last": 3}


def test_a_members_failed_input_puts_back_only_what_it_touched():
    """A keyed member's input that raises is undone field by field: a counter set, a list
    grown in place, a nested map changed in place, a field deleted and one added all come
    back as they were; the input before it (which returned) keeps its write."""
    from elastic_sps.pipeline.key_state import KeyState
    from elastic_sps.pipeline.local_store import MemoryStore

    store = MemoryStore()
    store.put("s", 0, "k", {"n": 1, "items": [1, 2], "m": {"a": 1}, "gone": True})
    state = KeyState(store, 0, "k")
    state.snapshot()  # the first input: it returns
    state["n"] = 2
    undo = state.snapshot()  # the second: it raises after these
    state["n"] = 3
    state["items"].append(3)
    state["m"]["a"] = 5
    del state["gone"]
    state["new"] = 1
    state.restore(undo)
    assert dict(state) == {"n": 2, "items": [1, 2], "m": {"a": 1}, "gone": True}
    state.save()
    assert store.get("s", 0, "k") == {"n": 2, "items": [1, 2], "m": {"a": 1}, "gone": True}


def test_an_undone_input_on_an_unchanged_key_writes_nothing():
    from elastic_sps.io.state_store import MISSING
    from elastic_sps.pipeline.key_state import KeyState
    from elastic_sps.pipeline.local_store import MemoryStore

    store = MemoryStore()
    state = KeyState(store, 0, "k")
    undo = state.snapshot()
    state["n"] = 1
    state.restore(undo)
    state.save()
    assert dict(state) == {} and store.get("s", 0, "k") is MISSING


def test_what_an_earlier_input_held_is_put_back_too_and_in_its_place():
    """The first input (it returns) sets `log` to a list it keeps and `b` to `a`'s list
    (one list under two names); the second changes both lists through those references,
    deletes `gone` and sets it again, then raises: every field is as the first input left
    it, in the same order."""
    from elastic_sps.pipeline.key_state import KeyState
    from elastic_sps.pipeline.local_store import MemoryStore

    store = MemoryStore()
    store.put("s", 0, "k", {"first": 1, "a": [1], "gone": 0, "last": 2})
    state = KeyState(store, 0, "k")
    held: list[str] = []
    state.snapshot()
    state["log"] = held
    state["b"] = state["a"]
    undo = state.snapshot()
    held.append("x")
    state["a"].append(2)  # `b` too: the same list
    del state["gone"]
    state["gone"] = 5
    state.restore(undo)
    assert list(state.items()) == [
        ("first", 1), ("a", [1]), ("gone", 0), ("last", 2), ("log", []), ("b", [1])
    ]  # fmt: skip
