"""Operator chaining: which operators fuse, the fused operator's figures (hand-summed),
and a chain's members called in turn at run time."""

from __future__ import annotations

import json
from typing import Any

import pytest

from elastic_sps.model import topology
from elastic_sps.model.topology import Edge, TopologyError, chained, from_dict
from elastic_sps.pipeline.chain import ChainedOperator, MemberFailed, open_runnable
from elastic_sps.pipeline.engine import Event, OperatorCore
from elastic_sps.pipeline.failures import describe
from elastic_sps.pipeline.operators import Context

pytestmark = pytest.mark.unit


def twitter_chained() -> topology.Topology:
    return from_dict({**topology.load("twitter").to_dict(), "chain": True}, "twitter")


def test_a_linear_application_is_one_operator_whose_et_is_its_members_sum():
    t = twitter_chained()
    (op,) = t.operators
    assert op.name == "parse..store"
    assert [m.name for m in op.members] == [
        "parse",
        "classify_content",
        "classify_author",
        "store",
    ]
    assert op.et_ms == pytest.approx(0.4 + 2.5 + 2.0 + 1.5)  # 6.4 ms per tweet
    assert (op.min_replicas, op.max_replicas) == (1, 8)
    assert t.edges == (Edge("source", "parse..store", 1.0),)
    assert t.entry_operators == ("parse..store",) and t.sinks == ("parse..store",)


def test_fractions_along_a_chain_weigh_its_et_and_carry_to_the_edge_leaving_it():
    t = from_dict(
        {
            "name": "f",
            "chain": True,
            "operators": [
                {"name": "a", "et_ms": 2.0, "max_replicas": 4},
                {"name": "b", "et_ms": 4.0, "max_replicas": 4},
                {"name": "c", "et_ms": 1.0, "max_replicas": 2},  # scales apart: no chain
            ],
            "edges": [
                {"from": "source", "to": "a"},
                {"from": "a", "to": "b", "fraction": 0.5},
                {"from": "b", "to": "c", "fraction": 2.0},
            ],
        }
    )
    assert t.names == ("a..b", "c")
    assert t["a..b"].et_ms == pytest.approx(2.0 + 0.5 * 4.0)  # b sees half of a's events
    assert Edge("a..b", "c", 1.0) in t.edges  # 0.5 x 2.0 events to c per chain input
    assert t.static_theta == {"a..b": 1.0, "c": 1.0}


def test_forks_joins_and_chain_false_keep_operators_apart():
    diamond = topology.load("diamond")
    assert chained(diamond) is diamond.declared  # every edge forks or joins
    t = from_dict(
        {
            "name": "g",
            "chain": True,
            "operators": [
                {"name": "a", "et_ms": 1.0},
                {"name": "b", "et_ms": 1.0, "chain": False},
                {"name": "c", "et_ms": 1.0},
                {"name": "d", "et_ms": 1.0},
            ],
            "edges": [
                {"from": "source", "to": "a"},
                {"from": "a", "to": "b"},
                {"from": "b", "to": "c"},
                {"from": "c", "to": "d"},
            ],
        }
    )
    assert t.names == ("a", "b", "c..d")


def test_a_chained_topology_round_trips_and_sums_its_members_measured_costs():
    doc = {
        "name": "m",
        "chain": True,
        "operators": [{"name": "a"}, {"name": "b", "output": "out"}],
        "edges": [{"from": "source", "to": "a"}, {"from": "a", "to": "b"}],
    }
    t = from_dict(doc)
    assert not t.measured and t["a..b"].output == "out"
    assert from_dict(t.to_dict()) == t
    measured = t.with_costs({"a": (0.5, 1.0), "b": (1.5, 0.0)})
    assert measured["a..b"].et_ms == pytest.approx(2.0)
    assert measured["a..b"].cpu_share == pytest.approx(0.25)  # 0.5 ms of 2.0 on a CPU


def test_a_chain_named_like_a_declared_operator_is_refused():
    with pytest.raises(TopologyError, match=r"a\.\.b"):
        from_dict(
            {
                "name": "clash",
                "chain": True,
                "operators": [
                    {"name": "a", "et_ms": 1.0},
                    {"name": "b", "et_ms": 1.0},
                    {"name": "a..b", "et_ms": 1.0, "max_replicas": 2},
                ],
                "edges": [
                    {"from": "source", "to": "a"},
                    {"from": "a", "to": "b"},
                    {"from": "source", "to": "a..b"},
                ],
            }
        )


def test_chain_must_be_a_boolean():
    with pytest.raises(TopologyError, match="chain must be true or false"):
        from_dict({**topology.load("twitter").to_dict(), "chain": "yes"})


# run time: the members' code, as a user writes it


def split_words(payload: Any, ctx: Any) -> list[tuple[str | None, Any]]:
    return [(None, w) for w in payload.split()]  # fan-out: one output per word


def drop_short(word: Any, ctx: Any) -> list[tuple[str | None, Any]]:
    if word == "boom":
        raise ValueError("no booms")
    return [(None, f"{ctx.operator}:{word}")] if len(word) > 2 else []  # a filter


def to_sink(word: Any, ctx: Any) -> list[tuple[str | None, Any]]:
    return [("sink", word.upper())]  # names its declared successor


def run_time_topology() -> topology.Topology:
    here = __name__
    return from_dict(
        {
            "name": "words",
            "chain": True,
            "operators": [
                {"name": "split", "et_ms": 1.0, "code": f"{here}:split_words"},
                {"name": "keep", "et_ms": 1.0, "code": f"{here}:drop_short"},
                {"name": "route", "et_ms": 1.0, "code": f"{here}:to_sink"},
                {"name": "sink", "et_ms": 1.0, "max_replicas": 2, "chain": False},
                {"name": "sink2", "et_ms": 1.0, "max_replicas": 2},
            ],
            "edges": [
                {"from": "source", "to": "split"},
                {"from": "split", "to": "keep"},
                {"from": "keep", "to": "route"},
                {"from": "route", "to": "sink"},
                {"from": "sink", "to": "sink2"},
            ],
        }
    )


def test_a_chain_calls_each_member_on_each_output_of_the_one_before():
    t = run_time_topology()
    assert t.names == ("split..route", "sink", "sink2")
    ctx = Context("split..route")
    chain = open_runnable(t, "split..route", ctx)
    out = chain.process("a big red fox", ctx)
    # "a" is filtered by keep; the others go through route, each member under its name
    assert out == [("sink", "KEEP:BIG"), ("sink", "KEEP:RED"), ("sink", "KEEP:FOX")]
    assert ctx.operator == "split..route"
    # a lone operator whose successors kept their names runs as declared, unwrapped
    assert not isinstance(open_runnable(t, "sink", Context("sink")), ChainedOperator)


def each_letter(word: Any, ctx: Any) -> list[tuple[str | None, Any]]:
    return [(None, f"{c}<{ctx.event_id}") for c in word]  # a second fan-out


def two_fan_outs() -> topology.Topology:
    here = __name__
    return from_dict(
        {
            "name": "letters",
            "operators": [
                {"name": "split", "et_ms": 1.0, "code": f"{here}:split_words"},
                {"name": "letters", "et_ms": 1.0, "code": f"{here}:each_letter"},
                {"name": "sink", "et_ms": 1.0, "chain": False},
            ],
            "edges": [
                {"from": "source", "to": "split"},
                {"from": "split", "to": "letters"},
                {"from": "letters", "to": "sink"},
            ],
        }
    )


def test_ids_stay_unique_down_two_fan_outs_and_chaining_changes_none():
    """``split`` makes "ab" (s1) and "cd" (s1/split.1); ``letters`` makes a letter of
    each, the first keeping its input's id: with a bare ``/k`` "b" and "c" would both be
    s1/1, and a stateful stage after them would drop one as a repeat."""

    expected = [
        ("s1", "a<s1"),
        ("s1/letters.1", "b<s1"),
        ("s1/split.1", "c<s1/split.1"),
        ("s1/split.1/letters.1", "d<s1/split.1"),
    ]
    t = two_fan_outs()
    assert t.names == ("split..letters", "sink")
    ctx = Context("split..letters")
    core = OperatorCore(t, "split..letters", open_runnable(t, "split..letters", ctx))
    out = core.apply(Event("s1", "ab cd", 1.0), ctx, None, [])
    assert [(i, p) for _, i, p in out] == expected
    assert ctx.event_id == "s1"  # the members' own ids were theirs only
    declared = t.declared  # unchained: each operator's core on what the one before made
    cores = {n: OperatorCore(declared, n, open_runnable(declared, n, Context(n))) for n in
             ("split", "letters")}  # fmt: skip
    words = cores["split"].apply(Event("s1", "ab cd", 1.0), Context("split"), None, [])
    out = [
        o
        for _, i, w in words
        for o in cores["letters"].apply(Event(i, w, 1.0, "split"), Context("letters"), None, [])
    ]
    assert [(i, p) for _, i, p in out] == expected


def test_a_member_that_raises_fails_its_own_input_alone_with_the_member_named():
    """split makes "big", "boom", "fox"; keep raises on "boom": that word fails alone,
    under its own id, as keep unchained would dead-letter it; "big" and "fox" go on."""
    t = run_time_topology()
    ctx = Context("split..route")
    core = OperatorCore(t, "split..route", open_runnable(t, "split..route", ctx))
    failed: list[MemberFailed] = []
    out = core.apply(Event("s1", "big boom fox", 1.0), ctx, None, failed)
    assert [(i, p) for _, i, p in out] == [
        ("s1", "KEEP:BIG"),
        ("s1/split.2", "KEEP:FOX"),
    ]
    assert [(f.operator, f.event_id, f.payload) for f in failed] == [("keep", "s1/split.1", "boom")]
    reason = describe(failed[0].error).reason
    assert reason == "ValueError: no booms (in 'keep', chained in 'split..route')"
    with pytest.raises(ValueError, match="no booms"):  # as an operator: it raises
        open_runnable(t, "split..route", ctx).process("big boom", ctx)


def test_outputs_to_a_successor_that_was_chained_carry_its_chained_name():
    t = from_dict(
        {
            "name": "renamed",
            "chain": True,
            "operators": [
                {"name": "route", "et_ms": 1.0, "code": f"{__name__}:to_sink", "max_replicas": 2},
                {"name": "sink", "et_ms": 1.0},
                {"name": "after", "et_ms": 1.0},
            ],
            "edges": [
                {"from": "source", "to": "route"},
                {"from": "route", "to": "sink"},
                {"from": "sink", "to": "after"},
            ],
        }
    )
    assert t.names == ("route", "sink..after")
    ctx = Context("route")
    assert open_runnable(t, "route", ctx).process("x", ctx) == [("sink..after", "X")]


def test_benchmark_lists_the_members_measured_and_each_chain_summed(tmp_path, capsys):
    from elastic_sps.services.cli import main

    (tmp_path / "words.jsonl").write_text('"a big red fox"\n"the lazy dog"\n')
    (tmp_path / "words.yaml").write_text(
        "name: words\nchain: true\n"
        "source: {format: json, sample_events: words.jsonl}\n"
        "operators:\n"
        f"  - {{name: split, code: '{__name__}:split_words'}}\n"
        f"  - {{name: keep, code: '{__name__}:drop_short'}}\n"
        "edges:\n  - {from: source, to: split}\n  - {from: split, to: keep, fraction: 3.5}\n"
    )
    assert main(["benchmark", "--topology", str(tmp_path / "words.yaml"), "--json"]) == 0
    rows = {r["operator"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) == {"split", "keep", "split..keep"}
    assert rows["split..keep"]["members"] == ["split", "keep"]
    # keep gets 3.5 words per sentence (4 and 3, declared): its et counts 3.5 times
    split, keep = rows["split"]["et_ms"], rows["keep"]["et_ms"]
    assert rows["split..keep"]["et_ms"] == pytest.approx(split + 3.5 * keep, rel=1e-3)


def test_chaining_is_the_default_and_chain_false_at_the_top_keeps_it_so():
    doc = {
        "name": "d",
        "operators": [{"name": "a", "et_ms": 1.0}, {"name": "b", "et_ms": 2.0}],
        "edges": [{"from": "source", "to": "a"}, {"from": "a", "to": "b"}],
    }
    assert from_dict(doc).names == ("a..b",)
    apart = from_dict({**doc, "chain": False})
    assert apart.names == ("a", "b")
    assert from_dict(apart.to_dict()).names == ("a", "b")  # written and read back: apart
    assert topology.load("twitter").names == (  # the paper sizes each operator
        "parse",
        "classify_content",
        "classify_author",
        "store",
    )
