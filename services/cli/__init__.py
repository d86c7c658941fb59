"""The ``elastic-sps`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from services.cli import ensemble, papers, simulation


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="elastic-sps", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    simulation.register(sub)
    papers.register(sub)
    ensemble.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from shared.io.embedded import PrerequisiteError
    from shared.model.topology import TopologyError
    from shared.model.traces import TraceError
    from shared.pipeline.operators import OperatorLoadError
    from shared.policies import PolicyConfigError

    bad_input = (TopologyError, TraceError, PolicyConfigError, ValueError, OperatorLoadError)
    try:
        return int(args.func(args) or 0)
    except (*bad_input, FileNotFoundError, PrerequisiteError) as exc:  # ValueError: pydantic
        print(f"elastic-sps: error: {exc}", file=sys.stderr)
        return 2
