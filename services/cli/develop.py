"""``check``, ``schema``, ``run-local``: a pipeline tried without servers."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


class CliError(ValueError):
    """A user's mistake on the command line: one ``elastic-sps: error:`` line, exit 2."""


def cmd_check(args: argparse.Namespace) -> int:
    from elastic_sps.pipeline.check import check

    report = check(args.topology, args.events, redis=args.redis)
    if args.json:
        print(
            json.dumps(
                {
                    "operators": report.operators,
                    "events": report.events,
                    "findings": [f.__dict__ for f in report.findings],
                }
            )
        )
    else:
        for f in report.findings:
            print(f.line())
            if f.frames:
                print("    " + f.frames.rstrip().replace("\n", "\n    "))
        print(
            f"{args.topology}: {report.operators} operators, {report.events} sample events; "
            f"{len(report.errors)} errors, {len(report.findings) - len(report.errors)} warnings"
        )
    if report.errors:
        raise CliError(f"check found {len(report.errors)} error(s) in {args.topology}")
    return 0


def preflight(topology: str, events: str | None) -> None:
    """``check``'s errors before any server starts (``up``, ``demo``, ``compare --live``):
    the first as the command's error."""
    from elastic_sps.pipeline.check import check

    errors = check(topology, events, max_events=200).errors
    if errors:
        more = f" (and {len(errors) - 1} more: elastic-sps check)" if len(errors) > 1 else ""
        raise CliError(f"{errors[0].message}{more}")


def cmd_schema(args: argparse.Namespace) -> int:
    from elastic_sps.model.topology_doc import json_schema

    print(json.dumps(json_schema(), indent=2))
    return 0


def cmd_run_local(args: argparse.Namespace) -> int:
    from elastic_sps.model import topology
    from elastic_sps.pipeline.local_run import run_local
    from elastic_sps.pipeline.samples import sample_payloads

    topo = topology.load(args.topology)
    payloads = sample_payloads(topo, args.events)
    if payloads is None:
        raise CliError(f"{args.topology} names no sample events: pass --events FILE")
    run = run_local(topo, payloads, redis=args.redis)
    for topic, values in run.outputs.items():
        for v in values:
            print(json.dumps({"topic": topic, "value": v}))
    for d in run.dead_letters:
        letter = {"operator": d.operator, "id": d.event_id, "reason": d.reason}
        print(json.dumps({"dead_letter": letter}))
    summary = {
        "events": run.events,
        "outputs": {t: len(v) for t, v in run.outputs.items()},
        "dead_letters": len(run.dead_letters),
        "late": len(run.late),
        "dropped": run.dropped,
    }
    print(json.dumps({"summary": summary}), file=sys.stderr)
    return 0


def _pipeline_arguments(p: Any) -> None:
    """What ``check`` and ``run-local`` take: the topology, its payloads, a Redis."""
    p.add_argument("--topology", required=True, help="built-in name or YAML file")
    p.add_argument(
        "--events", metavar="FILE", help="JSON lines of payloads (default: the topology's samples)"
    )
    p.add_argument("--redis", metavar="URL", help="a Redis for operators using ctx.redis")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "check",
        help="check a topology without servers: its document, code and sample events",
    )
    _pipeline_arguments(p)
    p.add_argument("--json", action="store_true", help="the findings as one JSON object")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("schema", help="the topology document's JSON Schema (for editors)")
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser(
        "run-local",
        help="run a topology's operators in this process over payloads; outputs as JSON lines",
    )
    _pipeline_arguments(p)
    p.set_defaults(func=cmd_run_local)
