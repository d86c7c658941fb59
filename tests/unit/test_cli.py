"""The command line's conventions: one error line and exit 2 for a user's mistake, every
option described, one policy and predictor syntax, ``--version``."""

from __future__ import annotations

import argparse
import json

import pytest

from services.cli import build_parser, main

pytestmark = pytest.mark.unit


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_every_option_of_every_command_is_described():
    bare = [
        f"{name} {a.option_strings or a.dest}"
        for name, p in _commands().items()
        for a in p._actions
        if not a.help and a.dest != "help"
    ]
    assert bare == []


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("elastic-sps ")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["explain", "--run", "/nonexistent"], "decisions.jsonl does not exist"),
        (["up", "--replace", "nothing"], "--replace wants NAME=COMMAND"),
        (["simulate", "--topology", "nope"], "unknown topology 'nope'"),
        (["simulate", "--predictor", "crystal-ball"], "crystal-ball"),
    ],
)
def test_a_users_mistake_is_one_error_line_and_exit_2(capsys, argv, said):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("elastic-sps: error: ") and said in err[0]


@pytest.mark.parametrize("predictor", ["auto", "bandit", "basic@0.6", "lr"])
def test_simulate_takes_the_predictors_demo_takes(predictor):
    from shared.model import topology
    from shared.policies import make_policy

    args = build_parser().parse_args(["simulate", "--predictor", predictor])
    assert make_policy(f"pa-sps:{args.predictor}", topology.load("twitter")).name == (
        f"pa-sps:{predictor}"
    )


def test_simulate_with_a_utilisation_target(capsys):
    argv = ["simulate", "--trace", "short-spikes", "--predictor", "basic@0.6", "--json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["policy"] == "pa-sps:basic@0.6"


def test_a_users_package_named_shared_is_detected(tmp_path):
    import os
    import subprocess
    import sys

    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "__init__.py").write_text("")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from services.cli import main; sys.exit(main())",
            "--version",
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert f"the package 'shared' imported from {tmp_path} is not elastic-sps's" in done.stderr
