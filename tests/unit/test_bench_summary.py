"""The comparisons' one summary and run loop (``benchmarks.harness.summary``, ``runs``) and
the collector's reading of each engine's output shape, on hand-checked numbers."""

from __future__ import annotations

import json

import pytest

from benchmarks.harness.collector import unwrap
from benchmarks.harness.runs import alternating, names, paced, run_all
from benchmarks.harness.summary import cpu_cells, idle_cells, latency_cells, lines, summary

pytestmark = pytest.mark.unit


def test_the_summary_gives_min_median_max_per_peer_in_first_seen_order():
    rows = [
        {"peer": "quix", "events_per_s": 300, "p99_ms": 9.0},
        {"peer": "sps", "events_per_s": 10, "p99_ms": 40.0},
        {"peer": "quix", "events_per_s": 100, "p99_ms": 7.0},
        {"peer": "sps", "events_per_s": 20, "p99_ms": 60.0},
        {"peer": "quix", "events_per_s": 200, "p99_ms": 8.0},
    ]
    assert summary(rows, ("peer",), ("events_per_s", "p99_ms")) == [
        {
            "peer": "quix",
            "runs": 3,
            "events_per_s": {"min": 100, "median": 200, "max": 300},
            "p99_ms": {"min": 7.0, "median": 8.0, "max": 9.0},
        },
        {
            "peer": "sps",
            "runs": 2,
            "events_per_s": {"min": 10, "median": 15.0, "max": 20},
            "p99_ms": {"min": 40.0, "median": 50.0, "max": 60.0},
        },
    ]


def test_the_summary_leaves_out_failed_runs_and_missing_values_and_ands_the_flags():
    rows = [
        {"peer": "sps", "query": "q5", "exact": True, "events_per_core_s": 400},
        {"peer": "sps", "query": "q5", "exact": False, "events_per_core_s": None},
        {"peer": "sps", "query": "q5", "run": 2, "error": "3 of 9 windows missing"},
        {"peer": "sps", "query": "q7", "run": 0, "error": "dead"},  # no run left: no line
        {"peer": "bytewax", "query": "q5", "exact": True, "events_per_core_s": None},
    ]
    out = summary(rows, ("peer", "query"), ("events_per_core_s",), all_of=("exact",))
    assert out == [
        {"peer": "sps", "query": "q5", "runs": 2, "exact": False,
         "events_per_core_s": {"min": 400, "median": 400, "max": 400}},
        {"peer": "bytewax", "query": "q5", "runs": 1, "exact": True},
    ]  # fmt: skip


def test_latency_cells_are_the_50th_and_99th_percentiles_interpolated():
    # 1..100 ms: the median sits between 50 and 51; the 99th at 98.01 of 99 steps
    assert latency_cells([float(k) for k in range(1, 101)]) == {"p50_ms": 50.5, "p99_ms": 99.0}
    assert latency_cells([250.0, 250.0]) == {"p50_ms": 250.0, "p99_ms": 250.0}


def test_cpu_cells_spread_every_roles_seconds_over_the_events():
    # 0.5 s broker + 0.25 s bench over 1,000 events: 0.75 ms an event
    assert cpu_cells({"broker": 0.5, "bench": 0.25}, 1000) == {
        "cpu_ms_per_event": 0.75,
        "cpu_ms_per_event_by_role": {"bench": 0.25, "broker": 0.5},
    }


def test_the_text_summary_puts_labels_flags_then_each_spread():
    line = {"peer": "sps", "query": "q5", "runs": 2, "exact": True,
            "p50_ms": {"min": 1.0, "median": 1.5, "max": 2.0}}  # fmt: skip
    assert lines([line]) == [f"{'sps':<16} q5 exact=True p50_ms 1.0/1.5/2.0  (min/median/max)"]


def test_the_peers_alternate_run_by_run_over_every_case():
    order = list(alternating(2, ["a", "b"], ["q5", "q7"]))
    assert order == [
        (0, "q5", "a"), (0, "q5", "b"), (0, "q7", "a"), (0, "q7", "b"),
        (1, "q5", "b"), (1, "q5", "a"), (1, "q7", "b"), (1, "q7", "a"),
    ]  # fmt: skip


def test_a_failed_run_is_a_row_with_its_error_and_json_mode_keeps_stdout_clean(capsys):
    def measure(peer: str, case: dict[str, str]) -> dict[str, object]:
        if peer == "bad":
            raise RuntimeError("2 of 5 outputs missing")
        return {"peer": peer, **case, "events_per_s": 7}

    rows = run_all(measure, ["good", "bad"], [{"query": "q5"}], 1, quiet=True)
    assert rows == [
        {"peer": "good", "query": "q5", "events_per_s": 7, "run": 0},
        {"peer": "bad", "query": "q5", "run": 0, "error": "2 of 5 outputs missing"},
    ]
    out, err = capsys.readouterr()
    assert out == "" and [json.loads(x) for x in err.splitlines()] == rows


def test_unwrap_reads_each_engines_output_shape():
    assert unwrap({"id": "7", "value": {"n": 1}}) == ("7", {"n": 1})  # elastic-sps's sink
    tweet = {"_meta": {"id": 12}, "text": "x"}
    assert unwrap(tweet) == ("12", tweet)  # the peers' stateless chain
    envelope = {"id": "9", "ts": 1.0, "src": "source", "payload": {}}
    assert unwrap(envelope) == ("9", envelope)  # an operator's topic
    row = {"auction": 1, "window_start": 0}
    assert unwrap(row) == (None, row)  # a peer's Nexmark row


def test_flags_lists_and_an_unpaced_feed():
    assert names(" q5, ,q7 ") == ["q5", "q7"]
    assert list(paced(["x", "y"], None)) == [(0, "x"), (1, "y")]


def test_idle_cells_give_cores_at_rest_in_all_and_by_role():
    # 10 s at rest: the broker 1.2 CPU s, the JVM 0.5, the workers 0.3 -> 0.2 cores in all
    used = {"spark driver JVM": 0.5, "broker": 1.2, "spark python workers": 0.3}
    assert idle_cells(used, 10.0) == {
        "idle_cores": 0.2,
        "idle_cores_by_role": {
            "broker": 0.12,
            "spark driver JVM": 0.05,
            "spark python workers": 0.03,
        },
    }
    assert idle_cells({"broker": 1.0}, 0) == {}
