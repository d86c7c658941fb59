"""elastic-sps: elastic stream processing on Kafka, Redis and Spark. Try a pipeline with
check and run-local (no servers), run it with up or demo, compare policies with simulate
and compare."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from elastic_sps.services.cli import develop, ensemble, papers, simulation


class _Defaults(argparse.ArgumentDefaultsHelpFormatter):
    """An option's default in its help, when it has one (not None or False)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """Every command's help shows its options' defaults."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Defaults)
        super().__init__(*args, **kwargs)


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("elastic-sps")
    except PackageNotFoundError:  # run from a checkout without installing
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="elastic-sps", description=__doc__)
    parser.add_argument("--version", action="version", version=f"elastic-sps {version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    develop.register(sub)
    simulation.register(sub)
    papers.register(sub)
    ensemble.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from elastic_sps.io.embedded import PrerequisiteError
    from elastic_sps.model.topology import TopologyError
    from elastic_sps.model.traces import TraceError
    from elastic_sps.pipeline.failures import OperatorFailing
    from elastic_sps.pipeline.operators import OperatorLoadError
    from elastic_sps.policies import PolicyConfigError

    bad_input = (TopologyError, TraceError, PolicyConfigError, ValueError, OperatorLoadError)
    try:
        return int(args.func(args) or 0)
    except (*bad_input, OperatorFailing, FileNotFoundError, PrerequisiteError) as exc:
        # ValueError: pydantic's too; develop.CliError, a command's own
        print(f"elastic-sps: error: {exc}", file=sys.stderr)
        return 2
