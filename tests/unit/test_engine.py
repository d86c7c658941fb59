"""The per-event engine's core on in-memory ports (``MemoryStore``): each way the
stateful path once broke, as a test that fails without its fix. Topology: ``up``
(stateless, 2 replicas) -> ``win`` (count per key and 10 s of event time) -> ``total``
(a keyed running sum of the window results)."""

from __future__ import annotations

import copy

import pytest

from elastic_sps.io.watermarks import Declaration
from elastic_sps.model import topology
from elastic_sps.pipeline.chain import open_runnable
from elastic_sps.pipeline.engine import Event, OperatorCore
from elastic_sps.pipeline.local_store import MemoryStore
from elastic_sps.pipeline.operators import Context, with_ids
from elastic_sps.pipeline.stateful import Late

pytestmark = pytest.mark.unit

TOPO = topology.from_dict(
    {
        "operators": [
            {"name": "up", "et_ms": 1, "max_replicas": 2},
            {"name": "win", "et_ms": 1, "key": "field:k", "window": {"tumbling_s": 10}},
            {
                "name": "total",
                "et_ms": 1,
                "key": "field:key",
                "code": "tests.support.engine_ops:sum_values",
            },
            {
                "name": "bad",
                "et_ms": 1,
                "key": "field:k",
                "code": "tests.support.engine_ops:write_then_raise",
            },
        ],
        "edges": [
            {"from": "source", "to": "up"},
            {"from": "up", "to": "win"},
            {"from": "win", "to": "total"},
            {"from": "source", "to": "bad"},
        ],
    }
)


def _core(name: str) -> OperatorCore:
    return OperatorCore(TOPO, name, open_runnable(TOPO, name, Context(name)))


class Partition:
    """One partition of an operator, driven as the dataplane drives it: a log of
    records (events and declarations), in order; what it emits is collected."""

    def __init__(self, name: str, store: MemoryStore | None = None) -> None:
        self.core = _core(name)
        self.store = store or MemoryStore()
        self.valve = self.core.valve(self.store)
        self.ctx = Context(name)
        self.out: list[tuple[str, object]] = []
        self.late: list[str] = []

    def event(self, event_id: str, t: float, src: str = "up", **payload: object) -> None:
        ev = Event(event_id, payload, t, src)
        if self.core.repeat(ev, self.store):
            return
        try:
            self.out += [(i, p) for _, i, p in self.core.apply(ev, self.ctx, self.store, [])]
        except Late:
            self.late.append(event_id)

    def declare(
        self, src: str, part: int, wm: float | None, idle: bool = False, of: int = 2
    ) -> None:
        for res in self.core.declare(self.valve, Declaration(src, part, of, wm, idle), self.store):
            self.out.append((res.id, res.payload))


def test_a_window_closes_when_both_inputs_pass_it_without_another_event():
    """up/0 and up/1 deliver in one task with times 5 and 12: the watermark is 5; when
    up/0 declares 15 it is 12 and x@0 closes with no later event."""
    p = Partition("win")
    p.event("a", 5, k="x")
    p.event("b", 12, k="x")
    p.declare("up", 0, 5)
    p.declare("up", 1, 12)
    assert p.valve.current == 5 and p.out == []
    p.declare("up", 0, 15)
    assert p.valve.current == 12
    assert p.out == [("x@0", {"key": "x", "start": 0.0, "end": 10.0, "value": 1})]


def test_an_input_not_yet_heard_from_holds_the_watermark():
    p = Partition("win")
    p.declare("up", 0, 61)
    assert p.valve.current is None  # up/1 has said nothing


def test_an_input_behind_is_waited_for_however_long_it_is_silent():
    """up/1 is behind at 41 (it never declared idle: it has events queued), up/0 at 61:
    the watermark stays 41, so up/1's events at 45 and 48 count, and x@40 = 3."""
    p = Partition("win")
    p.event("e41", 41, k="x")
    p.declare("up", 1, 41)
    p.declare("up", 0, 61)
    assert p.valve.current == 41
    p.event("e45", 45, k="x")
    p.event("e48", 48, k="x")
    p.declare("up", 1, 50)
    assert p.late == []
    assert p.out == [("x@40", {"key": "x", "start": 40.0, "end": 50.0, "value": 3})]


def test_the_tail_closes_once_every_input_is_idle():
    """Both inputs idle: the watermark is the greatest of theirs (Flink's valve), 19."""
    p = Partition("win")
    p.event("a", 3, k="x")
    p.event("b", 14, k="y")
    p.declare("up", 0, 3, idle=True)
    assert p.out == []
    p.declare("up", 1, 19, idle=True)
    assert p.valve.current == 19 and p.valve.idle
    assert [i for i, _ in p.out] == ["x@0"]  # y@10 ends at 20: not yet


def test_a_retry_of_the_same_log_emits_the_same_values():
    """A crash between flush and commit: the retry starts from the committed store and
    reads the same log; firing goes by the log's declarations, not the wall clock."""
    committed = MemoryStore()
    log = [("e", "a", 1.0), ("d", 0, 4.0), ("e", "b", 2.0), ("d", 1, 12.0), ("e", "c", 3.0)]
    runs = []
    for _ in range(2):
        p = Partition("win", copy.deepcopy(committed))
        for kind, who, t in log:
            if kind == "e":
                p.event(str(who), t, k="x")
            else:
                p.declare("up", int(who), t)
        p.declare("up", 0, 30.0)
        runs.append(p.out)
    assert runs[0] == runs[1] == [("x@0", {"key": "x", "start": 0.0, "end": 10.0, "value": 3})]


def test_a_repeat_from_upstream_at_a_new_offset_is_applied_once():
    p = Partition("win")
    p.event("a", 1, k="x")
    p.event("a", 1, k="x")  # the same event again (an upstream retry)
    p.declare("up", 0, 10, idle=True)
    p.declare("up", 1, 10, idle=True)
    assert p.out == [("x@0", {"key": "x", "start": 0.0, "end": 10.0, "value": 1})]


def test_a_second_stage_counts_a_repeated_window_result_once():
    t = Partition("total")
    result = {"key": "x", "start": 0.0, "end": 10.0, "value": 3}
    t.event("x@0", 9.999, **result)
    t.event("x@0", 9.999, **result)
    assert t.store.state() == {"x": {"sum": 3}}


def test_a_window_result_lands_in_the_same_window_of_a_next_stage():
    """Its event time is its window's last instant (end - 1 ms), as Flink's maxTimestamp:
    a next tumbling 10 s stage places x@0's result in [0, 10), not [10, 20)."""
    p = Partition("win")
    p.event("a", 1, k="x")
    p.declare("up", 0, 10)
    (res,) = p.core.declare(p.valve, Declaration("up", 1, 2, 10.0), p.store)
    assert res.event_time == pytest.approx(9.999)
    spec = TOPO["win"].window
    assert spec is not None and spec.assign(res.event_time) == [(0, 10)]


def test_an_operator_that_raises_leaves_no_state_write_behind():
    """total 10, then v 99 raises after adding to its total and its list: both stay."""
    p = Partition("bad")
    p.event("a", 1, k="x", v=10)
    with pytest.raises(ValueError, match="too large"):
        p.event("b", 2, k="x", v=99)
    assert p.store.state() == {"x": {"total": 10, "seen": [10]}}
    p.event("c", 3, k="x", v=5)
    assert p.store.state() == {"x": {"total": 15, "seen": [10, 5]}}


def test_each_output_of_an_event_has_its_own_id():
    out = with_ids("e7", [(None, 1), ("a", 2), (None, 3)], "split")
    assert [(d, i) for d, i, _ in out] == [(None, "e7"), ("a", "e7/split.1"), (None, "e7/split.2")]


def test_one_id_from_two_senders_is_not_a_repeat():
    """Two paths of a diamond bring event e into one keyed operator: both count."""
    t = Partition("total")
    t.event("e", 1, src="a", key="x", value=2)
    t.event("e", 1, src="b", key="x", value=3)
    assert t.store.state() == {"x": {"sum": 5}}


def test_a_window_partition_holding_an_open_window_is_never_idle():
    """Both inputs idle at 19: x@10 (ends at 20) is still open, a result still to come
    with event time 19.999; so ``win`` declares 19, not idle: a successor whose other
    input runs ahead to 1090 must wait for it (the late results once seen live)."""
    p = Partition("win")
    p.event("a", 14, k="x")
    p.declare("up", 0, 19, idle=True)
    p.declare("up", 1, 19, idle=True)
    d = p.core.declaration(0, p.valve, p.store)
    assert (d.wm, d.idle) == (19, False)
    p.declare("up", 0, 1090)  # the stream resumes on up/0 only
    assert p.out == [("x@10", {"key": "x", "start": 10.0, "end": 20.0, "value": 1})]
    d = p.core.declaration(0, p.valve, p.store)
    assert (d.wm, d.idle) == (1090, False)


def test_a_window_partition_declares_below_a_window_kept_open_for_lateness():
    """lateness 5: at watermark 12, [0, 10) is still open until 15 (its result 9.999 is
    to come), and an event at 7.5 would still be taken, opening [0, 10) again: the
    partition declares 12 - 5 - 0.001 = 6.999, below both."""
    topo = topology.from_dict(
        {
            "operators": [
                {"name": "up", "et_ms": 1, "max_replicas": 1},
                {
                    "name": "w",
                    "et_ms": 1,
                    "key": "field:k",
                    "window": {"tumbling_s": 10, "lateness_s": 5},
                },
            ],
            "edges": [{"from": "source", "to": "up"}, {"from": "up", "to": "w"}],
        }
    )
    core = OperatorCore(topo, "w", open_runnable(topo, "w", Context("w")))
    store = MemoryStore()
    valve = core.valve(store)
    core.apply(Event("a", {"k": "x"}, 3.0, "up"), Context("w"), store, [])
    assert core.declare(valve, Declaration("up", 0, 1, 12.0), store) == []
    assert core.declaration(0, valve, store).wm == pytest.approx(6.999)


def test_a_fired_windows_state_is_gone():
    p = Partition("win")
    for i, t in enumerate((1, 2, 11)):
        p.event(f"e{i}", t, k="x")
    assert p.store.open_windows() == 2
    p.declare("up", 0, 30, idle=True)
    p.declare("up", 1, 30, idle=True)
    assert [i for i, _ in p.out] == ["x@0", "x@10"] and p.store.open_windows() == 0


def test_a_join_of_two_operators_gives_each_input_its_own_output_ids():
    """x reaches k from a and from b: two events; k's outputs must stay two at l."""
    topo = topology.from_dict(
        {
            "operators": [
                {"name": "a", "et_ms": 1},
                {"name": "b", "et_ms": 1},
                {"name": "k", "et_ms": 1, "code": "tests.support.engine_ops:split"},
                {
                    "name": "l",
                    "et_ms": 1,
                    "key": "field:key",
                    "output": "out",
                    "code": "tests.support.engine_ops:sum_values",
                },
            ],
            "edges": [
                {"from": "source", "to": "a"},
                {"from": "source", "to": "b"},
                {"from": "a", "to": "k"},
                {"from": "b", "to": "k"},
                {"from": "k", "to": "l"},
            ],
        }
    )
    from elastic_sps.pipeline.local_run import run_local

    run = run_local(topo, [{"key": "x", "value": 1}])
    assert run.repeats == {} and run.state["l"] == {"x": {"sum": 4}}
