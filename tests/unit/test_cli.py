"""The command line's conventions: one error line and exit 2 for a user's mistake, every
option described, one policy and predictor syntax, ``--version``."""

from __future__ import annotations

import argparse
import json

import pytest

from elastic_sps.services.cli import build_parser, main

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
    from elastic_sps.model import topology
    from elastic_sps.policies import make_policy

    args = build_parser().parse_args(["simulate", "--predictor", predictor])
    assert make_policy(f"pa-sps:{args.predictor}", topology.load("twitter")).name == (
        f"pa-sps:{predictor}"
    )


def test_simulate_with_a_utilisation_target(capsys):
    argv = ["simulate", "--trace", "short-spikes", "--predictor", "basic@0.6", "--json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["policy"] == "pa-sps:basic@0.6"


def test_a_users_own_shared_and_services_packages_live_beside_it(tmp_path):
    """elastic-sps installs one package, ``elastic_sps``: a user project's ``shared`` and
    ``services`` come first on sys.path and the CLI still runs its own code."""
    import os
    import subprocess
    import sys

    for name in ("shared", "services"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("MINE = True\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    code = (
        "import services, shared; assert services.MINE and shared.MINE; "
        "import sys; from elastic_sps.services.cli import main; sys.exit(main())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "check", "--topology", "twitter"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
