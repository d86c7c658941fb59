"""``elastic-sps check``: each fault a user makes, caught without servers, its cause in
one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elastic_sps.services.cli import main

pytestmark = pytest.mark.unit

OPS = "tests.support.broken_ops"
HEAD = "source: {sample_events: ev.jsonl}\nedges: [{from: source, to: a}]\noperators:\n"


def _write(tmp_path: Path, operator: str) -> str:
    (tmp_path / "ev.jsonl").write_text(
        "".join(json.dumps({"text": f"Hi {n}", "n": n}) + "\n" for n in range(7))
    )
    path = tmp_path / "t.yaml"
    path.write_text(HEAD + f"  - {operator}\n")
    return str(path)


@pytest.mark.parametrize(
    ("operator", "cause"),
    [
        (f"{{name: a, code: '{OPS}:lower', output: out", "t.yaml:5:1: not valid YAML: expected"),
        (f"{{name: a, code: '{OPS}:lower', outptu: out}}", "operator 'a': unknown keys ['outptu']"),
        ("{name: a, code: 'no_such_mod:f', output: out}", "No module named 'no_such_mod'"),
        (f"{{name: a, code: '{OPS}:OpenRaises', output: out}}", "ConnectionError: model server"),
        (
            f"{{name: a, code: '{OPS}:wrong_shape', output: out}}",
            "7 of 7 sample events; the first (local/0): TypeError: operator 'a' returned dict",
        ),
        (
            f"{{name: a, code: '{OPS}:raises_on_most', output: out}}",
            "raised on 4 of 7 sample events; the first (local/1): KeyError: 'lang'",
        ),
        (
            f"{{name: a, code: '{OPS}:routes_nowhere', output: out}}",
            "operator 'a' routes 1 sample events nowhere: NotASuccessor: operator 'a' sent "
            "to 'nope'",
        ),
        (
            f"{{name: a, code: '{OPS}:NoMerge', key: 'field:text', output: out, "
            "window: {session_gap_s: 5}}",
            "a session window's aggregate needs merge(a, b)",
        ),
    ],
)
def test_each_fault_is_one_error_line_and_exit_2(tmp_path, capsys, operator, cause):
    assert main(["check", "--topology", _write(tmp_path, operator)]) == 2
    out, err = capsys.readouterr()
    [line] = [x for x in out.splitlines() if x.startswith("error: ")]
    assert cause in line
    assert err.startswith("elastic-sps: error: check found 1 error(s)")


def test_a_good_topology_passes_and_warns_of_a_sink_without_output(tmp_path, capsys):
    assert main(["check", "--topology", _write(tmp_path, f"{{name: a, code: '{OPS}:lower'}}")]) == 0
    out = capsys.readouterr().out
    assert "warning: operator 'a' is a sink without output" in out
    assert "1 operators, 7 sample events; 0 errors, 1 warnings" in out


def test_the_frames_shown_are_the_users(tmp_path, capsys):
    main(["check", "--topology", _write(tmp_path, f"{{name: a, code: '{OPS}:raises_on_most'}}")])
    out = capsys.readouterr().out
    assert 'broken_ops.py", line 18, in raises_on_most' in out
    assert "local_run.py" not in out


def test_schema_describes_the_operator_keys(capsys):
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert {"et_ms", "key", "window", "output"} <= set(schema["$defs"]["OperatorDoc"]["properties"])


def test_a_session_without_merge_is_an_error_even_without_sample_events(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(
        "edges: [{from: source, to: a}]\noperators:\n"
        f"  - {{name: a, code: '{OPS}:NoMerge', key: 'field:u', output: out, "
        "window: {session_gap_s: 5}}\n"
    )
    assert main(["check", "--topology", str(path)]) == 2
    assert "a session window's aggregate needs merge(a, b)" in capsys.readouterr().out


def test_the_old_source_key_form_is_read_with_a_warning_and_a_typo_is_told(tmp_path, capsys):
    (tmp_path / "ev.jsonl").write_text('{"user": "u1", "text": "A"}\n')
    for key, warning in (
        ("user", "source.key 'user' is the old form of key: 'field:user'"),
        ("'field:usr'", "source.key 'field:usr' is in none of the sample events"),
    ):
        path = tmp_path / "k.yaml"
        path.write_text(
            f"source: {{sample_events: ev.jsonl, key: {key}}}\n"
            f"edges: [{{from: source, to: a}}]\noperators:\n"
            f"  - {{name: a, code: '{OPS}:lower', output: out}}\n"
        )
        assert main(["check", "--topology", str(path)]) == 0
        assert f"warning: {warning}" in capsys.readouterr().out


def test_a_keyed_member_that_gets_another_key_than_its_chains_head_is_an_error(tmp_path, capsys):
    """sum (keyed) -> relabel -> tally (keyed alike) chain; relabel moves a sum of 13 to
    key "a'": the second sample event (5 + 8) would fail live. Apart, tally routes it."""
    ops = "tests.support.engine_ops"
    (tmp_path / "ev.jsonl").write_text(
        "".join(json.dumps({"key": k, "value": v}) + "\n" for k, v in [("a", 5), ("a", 8)])
    )

    def topology(tally_extra: str) -> str:
        path = tmp_path / "k.yaml"
        path.write_text(
            "source: {sample_events: ev.jsonl}\n"
            "edges: [{from: source, to: sum}, {from: sum, to: relabel}, "
            "{from: relabel, to: tally}]\noperators:\n"
            f"  - {{name: sum, code: '{ops}:sum_values', key: 'field:key'}}\n"
            f"  - {{name: relabel, code: '{ops}:relabel'}}\n"
            f"  - {{name: tally, code: '{ops}:tally', key: 'field:key', output: out"
            f"{tally_extra}}}\n"
        )
        return str(path)

    assert main(["check", "--topology", topology("")]) == 2
    [line] = [x for x in capsys.readouterr().out.splitlines() if x.startswith("error: ")]
    assert "operator 'tally' is chained after a keyed operator on the same key" in line
    assert "1 sample event(s) reach it under another key (first: 'local/1' with key \"a'\"" in line
    assert "set `chain: false` on 'tally'" in line
    assert main(["check", "--topology", topology(", chain: false")]) == 0
