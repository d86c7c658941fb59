"""The user's pipeline pieces: loading operator code, the failure policy, records from
the user's topic, measured costs and the plan's cores limit (hand-checked numbers)."""

from __future__ import annotations

import sys
import textwrap

import pytest

from elastic_sps.control.plan import make_plan
from elastic_sps.io.envelope import Envelope, decode
from elastic_sps.model import topology
from elastic_sps.model.records import BadRecord, SourceSpec
from elastic_sps.pipeline.costs import measure
from elastic_sps.pipeline.failures import FailureGuard, OperatorFailing, describe
from elastic_sps.pipeline.operators import (
    Context,
    OperatorLoadError,
    instantiate,
    normalise,
    open_operator,
)
from elastic_sps.policies.base import Analysis, OperatorDecision

pytestmark = pytest.mark.unit


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """A user package outside the repository, importable as ``mypipe.ops``."""
    pkg = tmp_path / "mypipe"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ops.py").write_text(
        textwrap.dedent(
            """
            def double(payload, ctx):
                return [(None, {"n": payload["n"] * 2})]

            class Scale:
                def open(self, ctx):
                    self.factor = 3
                    self.opened_for = ctx.operator

                def process(self, payload, ctx):
                    return [(None, {"n": payload["n"] * self.factor})]

            class BrokenOpen:
                def open(self, ctx):
                    raise RuntimeError("no model file")

                def process(self, payload, ctx):
                    return []

            NOT_CALLABLE = 3
            """
        )
    )
    (pkg / "bad.py").write_text("import not_a_module_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "mypipe"
    for name in [m for m in sys.modules if m.startswith("mypipe")]:
        del sys.modules[name]


def test_a_function_and_a_class_are_operators(user_module):
    fn = open_operator("mypipe.ops:double", "d", Context("d"))
    assert fn.process({"n": 21}, Context("d")) == [(None, {"n": 42})]
    cls = open_operator("mypipe.ops:Scale", "s", Context("s"))
    assert cls.opened_for == "s"  # type: ignore[attr-defined]
    assert cls.process({"n": 5}, Context("s")) == [(None, {"n": 15})]


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("mypipe.bad:f", "operator 'x': cannot import module 'mypipe.bad' (ModuleNotFoundError"),
        ("mypipe.nowhere:f", "cannot import module 'mypipe.nowhere'"),
        ("mypipe.ops:missing", "module 'mypipe.ops' has no 'missing'"),
        ("mypipe.ops", "must be 'package.module:callable'"),
        ("mypipe.ops:NOT_CALLABLE", "neither a function nor a class"),
        ("mypipe.ops:BrokenOpen", "open() of 'mypipe.ops:BrokenOpen' failed (RuntimeError: no"),
    ],
)
def test_code_that_cannot_load_names_the_operator_and_module(user_module, code, message):
    with pytest.raises(OperatorLoadError) as err:
        open_operator(code, "x", Context("x"))
    assert message in str(err.value)


def test_outputs_are_checked_as_the_operators_bug():
    assert normalise(None, "a", ("b",)) == []
    assert normalise([(None, 1), ("b", 2)], "a", ("b",)) == [(None, 1), ("b", 2)]
    with pytest.raises(TypeError, match="returned dict"):
        normalise({"x": 1}, "a", ("b",))
    with pytest.raises(TypeError, match="each output is"):
        normalise([1, 2], "a", ("b",))
    with pytest.raises(TypeError, match="sent to 'c', not one of its successors"):
        normalise([("c", 1)], "a", ("b",))


def test_the_failure_guard_dead_letters_until_a_share_of_the_window_fails():
    """Window 10, share 0.5: 5 failures in the last 10 are bad input; the 6th is a bug."""
    try:
        raise KeyError("text")
    except KeyError as exc:
        failure = describe(exc)
    assert failure.reason == "KeyError: 'text'" and "test_pipeline.py" in failure.frames
    guard = FailureGuard("parse", "dead-letter", max_share=0.5, window=10)
    for _ in range(5):
        guard.ok()
    for _ in range(5):
        guard.failed(failure)  # 5 of the last 10: still the input's fault
    guard.ok()  # the oldest (ok) leaves, 5 of 10 still
    with pytest.raises(OperatorFailing, match="'parse' failed on 6 of its last 10 events"):
        guard.failed(failure)
    strict = FailureGuard("parse", "fail")
    with pytest.raises(OperatorFailing, match=r"raised KeyError: 'text' \(on_error: fail\)"):
        strict.failed(failure)


def test_records_become_events_by_the_source_section():
    spec = SourceSpec.from_dict({"topics": "orders", "key": "user.id"})
    ev, key = spec.event(b'{"user": {"id": 7}, "x": 1}', "orders", 2, 41, 1_700_000_000_500, 0)
    assert (ev.id, ev.ts, key) == ("orders/2/41", 1_700_000_000.5, "7")
    assert ev.payload == {"user": {"id": 7}, "x": 1}
    by_field = SourceSpec(id="field:order_id", time="field:at")
    ev, _ = by_field.event(b'{"order_id": "o-9", "at": "2026-01-01T00:00:01Z"}', "t", 0, 0, 0, 5)
    # the event's time from its field; latency still from the record (no stamp: arrival)
    assert (ev.id, ev.event_time, ev.ts) == ("o-9", 1_767_225_601.0, 5)
    ev, _ = by_field.event(b'{"order_id": 1, "at": 1767225601000}', "t", 0, 0, 0, 0)
    assert ev.event_time == 1_767_225_601.0  # epoch milliseconds
    assert decode(ev.encode()).event_time == 1_767_225_601.0  # it travels downstream
    # records of several shapes on one topic: the first path the record has
    shapes = SourceSpec(id="field:bid.id|person.id", time="field:bid.at|person.at")
    ev, _ = shapes.event(b'{"person": {"id": 4, "at": 1767225601000}}', "t", 0, 0, 0, 0)
    assert (ev.id, ev.event_time) == ("4", 1_767_225_601.0)
    text, _ = SourceSpec(format="text").event("héllo".encode(), "t", 0, 5, None, 12.0)
    assert (text.payload, text.ts) == ("héllo", 12.0)  # no timestamp: the arrival time
    raw = SourceSpec(format="bytes").event(b"\x00\xff", "t", 0, 0, 0, 0)[0]
    assert decode(raw.encode()).payload == b"\x00\xff"  # bytes survive the envelope
    for spec_, record, reason in [
        (SourceSpec(), b"{nope", "not JSON"),
        (SourceSpec(format="text"), b"\xff\xfe", "not UTF-8"),
        (by_field, b'{"at": 1}', "no event id at 'order_id'"),
        (by_field, b'{"order_id": 1, "at": "soon"}', "neither a number nor ISO 8601"),
        (SourceSpec(), None, "empty record"),
    ]:
        with pytest.raises(BadRecord, match=reason):
            spec_.event(record, "t", 0, 0, 0, 0)
    with pytest.raises(ValueError, match="need format: json"):
        SourceSpec(format="text", key="user.id")


def test_costs_are_measured_along_the_dag(user_module):
    """double emits one output per input, so Scale (after it) is measured on as many;
    both are plain CPU work, so their CPU share is high."""
    topo = topology.from_dict(
        {
            "chain": False,  # each operator apart
            "operators": [
                {"name": "d", "code": "mypipe.ops:double"},
                {"name": "s", "code": "mypipe.ops:Scale", "et_ms": 4},
            ],
            "edges": [{"from": "source", "to": "d"}, {"from": "d", "to": "s"}],
        }
    )
    costs = measure(topo, [{"n": k} for k in range(100)] + ["bad"], max_events=100)
    assert costs["d"].events == 80  # 100 + the 20 warm-up events are 120 at most; 101 given
    assert costs["d"].failed == 1  # "bad" has no ["n"]
    assert costs["s"].events == 80 and costs["s"].failed == 0
    assert costs["d"].et_ms > 0 and 0 <= costs["d"].cpu_share <= 1
    filled = topo.with_costs({n: (c.et_ms, c.cpu_share) for n, c in costs.items()})
    assert filled["s"].et_ms == 4  # declared figures stay
    assert filled["d"].et_ms == costs["d"].et_ms


def test_the_plan_counts_on_no_more_cpu_bound_replicas_than_the_cores_hold():
    """One CPU-bound operator (share 1) on 2 cores asks for 6: it gets 2, limited by the
    cores, and is short (LAS may shed); a waiting one beside it gets its 6."""
    topo = topology.from_dict(
        {
            "chain": False,  # each operator apart
            "operators": [
                {"name": "cpu", "et_ms": 2, "cpu_share": 1.0},
                {"name": "io", "et_ms": 2, "cpu_share": 0.05},
            ],
            "edges": [{"from": "source", "to": "cpu"}, {"from": "cpu", "to": "io"}],
        }
    )
    need = {n: OperatorDecision(6, 3000.0, 6.0) for n in ("cpu", "io")}
    plan = make_plan(topo, Analysis(0, 3000.0, need), {"cpu": 1, "io": 1}, 1.0, cores=2)
    assert dict(plan.targets) == {"cpu": 2, "io": 6}
    assert plan.limited == {"cpu": "cores"} and plan.short == ("cpu",)
    unlimited = make_plan(topo, Analysis(0, 3000.0, need), {"cpu": 1, "io": 1}, 1.0)
    assert dict(unlimited.targets) == {"cpu": 6, "io": 6}


def test_envelope_keeps_a_user_event_id():
    env = Envelope("orders/0/7", 1.0, "source", {"a": 1})
    assert decode(env.encode()).id == "orders/0/7"


def test_instantiate_wraps_a_function_and_gives_a_class_a_fresh_instance(user_module):
    from elastic_sps.pipeline.operators import FunctionOperator

    op = instantiate("mypipe.ops:double", "d")
    assert isinstance(op, FunctionOperator)
    assert op.process({"n": 2}, Context("d")) == [(None, {"n": 4})]
    first, second = instantiate("mypipe.ops:Scale", "s"), instantiate("mypipe.ops:Scale", "s")
    assert first is not second  # one per worker: nothing shared between opens


def test_cpu_bound_operators_get_a_task_per_replica_up_to_the_cores():
    """Two cores: the CPU-bound operator's micro-batch may run 2 tasks, the waiting one
    1 (its replicas are threads); Spark gets a task slot for each: local[3, F]."""
    from elastic_sps.services.dataplane.job import spark_master, tasks_for
    from elastic_sps.services.dataplane.slots import Slot, pack
    from elastic_sps.settings import DataplaneSettings

    topo = topology.from_dict(
        {
            "chain": False,  # each operator apart
            "operators": [
                {"name": "cpu", "et_ms": 2, "cpu_share": 0.95},
                {"name": "io", "et_ms": 2, "cpu_share": 0.05},
            ],
            "edges": [{"from": "source", "to": "cpu"}, {"from": "cpu", "to": "io"}],
        }
    )
    settings = DataplaneSettings(cores=2)
    assert tasks_for(settings, topo["cpu"]) == 2
    assert tasks_for(settings, topo["io"]) == 1
    assert spark_master(settings, topo) == "local[3,4]"
    # 8 active replicas of the CPU-bound one: 2 tasks of 4 slots each, never 8 processes
    slots = [Slot(j, 0, 10) for j in range(8)]
    assert [len(g) for g in pack(slots, tasks_for(settings, topo["cpu"]))] == [4, 4]


def test_the_cores_cap_rounds_to_the_nearest_whole_replica():
    """A tiny CPU-bound parse (0.01 ms) before a 0.7 ms scorer, on 2 cores: the scorer's
    share is 2 × 0.7 / 0.71 = 1.97 cores, so 2 replicas (not 1); parse's 0.03 → 1."""
    topo = topology.from_dict(
        {
            "chain": False,  # each operator apart
            "operators": [
                {"name": "parse", "et_ms": 0.01, "cpu_share": 1.0},
                {"name": "score", "et_ms": 0.7, "cpu_share": 1.0},
            ],
            "edges": [{"from": "source", "to": "parse"}, {"from": "parse", "to": "score"}],
        }
    )
    need = {n: OperatorDecision(4, 5000.0, 4.0) for n in ("parse", "score")}
    plan = make_plan(topo, Analysis(0, 5000.0, need), {"parse": 1, "score": 1}, 1.0, cores=2)
    assert dict(plan.targets) == {"parse": 1, "score": 2}


def test_a_text_sources_sample_file_is_read_line_by_line_unless_it_is_json_lines(tmp_path):
    from elastic_sps.pipeline.samples import read_events, record_bytes

    log = tmp_path / "app.log"
    log.write_text('GET /a 200\n\n{"not": "json here"}\n42\n')
    assert read_events(log, "text") == ["GET /a 200", '{"not": "json here"}', "42"]
    assert record_bytes(read_events(log, "text")[2], "text") == b"42"  # not the number
    jsonl = tmp_path / "lines.jsonl"
    jsonl.write_text('"GET /a 200"\n"x"\n')
    assert read_events(jsonl, "text") == ["GET /a 200", "x"]
    # a line that is not JSON where JSON is expected is the record it would be
    assert read_events(log, "json")[0] == b"GET /a 200"
