"""``demo``, ``up``, ``replay``, ``service``, ``rescale``: the running ensemble."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from elastic_sps.services.cli.develop import CliError, preflight
from elastic_sps.services.cli.simulation import (
    POLICY_HELP,
    PREDICTOR_HELP,
    TOPOLOGY_HELP,
    TRACE_HELP,
)
from elastic_sps.settings import DEFAULT_POLICY, DEFAULT_PREDICTOR


def cmd_demo(args: argparse.Namespace) -> int:
    """up + replay of a bundled spike trace + drain + report (``--simulate``: the
    simulator's comparison only, no services)."""
    if not args.simulate:
        from pathlib import Path

        preflight(args.topology, args.events)
        from elastic_sps.services.ensemble import demo

        out = demo.run(
            topology=args.topology,
            trace_name=args.trace,
            duration=args.duration,
            policy=args.policy,
            predictor=args.predictor,
            peak_rate=args.peak_rate,
            tau_ms=args.tau_ms,
            run_dir=Path(args.out) if args.out else None,
            live=not args.json,
            extra_env=goal_env(args),
            warmup_s=args.warmup,
            events_file=args.events,
            cycle=args.cycle,
        )
        if args.json:
            print(json.dumps(out["report"]))
        else:
            from elastic_sps.services.ensemble.report import print_report

            print_report(out["report"], [Path(p) for p in out["plots"]])
        return 0
    import time
    from pathlib import Path

    run_dir = Path(args.out or f"runs/demo-{time.strftime('%Y%m%d-%H%M%S')}")
    run_dir.mkdir(parents=True, exist_ok=True)
    from elastic_sps.services.cli.simulation import cmd_compare, compare_args

    code = cmd_compare(
        compare_args(
            topology=args.topology,
            trace=args.trace,
            plot=str(run_dir / "compare.png"),
            json=args.json,
        )
    )
    if not args.json:
        print(f"plot: {run_dir / 'compare.png'}")
    return code


SERVICES = ("monitor", "analyze", "plan", "execute", "ingress", "dataplane")


def goal_env(args: argparse.Namespace) -> dict[str, str]:
    """--latency-goal-ms (the one goal: the plan scales for it, LAS sheds only when the
    plan is short) and --stabiliser (a preset of elastic_sps.control.stabilise) as the services'
    settings."""
    env = {"SPS_LATENCY_GOAL_MS": str(args.latency_goal_ms)} if args.latency_goal_ms else {}
    return {**env, **({"SPS_STABILISER": args.stabiliser} if args.stabiliser else {})}


def _goal_arguments(p: Any) -> None:
    from elastic_sps.control.stabilise import DEFAULT_STABILISER, PRESETS

    p.add_argument(
        "--latency-goal-ms",
        type=float,
        help="one latency goal: the plan scales to meet it and LAS sheds only when even the "
        "largest pool or the budget cannot (default: none)",
    )
    p.add_argument(
        "--stabiliser",
        choices=list(PRESETS),
        help=f"the plan's stabiliser preset (default: SPS_STABILISER or {DEFAULT_STABILISER}; "
        "'none': the policy's counts as they come)",
    )


def _events_argument(p: Any, produced: bool = True) -> None:
    what = (
        "produced as plain records to the source topic at the trace's rate"
        if produced
        else "each operator measured on their path through the DAG"
    )
    p.add_argument(
        "--events",
        metavar="FILE",
        help=f"JSON lines, one payload each, {what} (default: the topology's sample events "
        "or generator)",
    )


def _cycle_argument(p: Any) -> None:
    p.add_argument(
        "--cycle",
        action="store_true",
        default=None,
        help="start the events file again when it ends; without it a file whose records "
        "carry their ids (source.id: field:...) must hold the whole run (the report says "
        "when ids repeat)",
    )


def parse_replacements(items: list[str]) -> dict[str, list[str]]:
    """``NAME=COMMAND`` items (``analyze='python -m my_analyze'``) to argv lists."""
    import shlex

    out = {}
    for item in items:
        name, sep, command = item.partition("=")
        if not sep or not command.strip():
            raise CliError(f"--replace wants NAME=COMMAND, got {item!r}")
        if name not in SERVICES:
            raise CliError(f"--replace: no service {name!r} (services: {', '.join(SERVICES)})")
        out[name] = shlex.split(command)
    return out


def cmd_up(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    from elastic_sps.logs import configure_logging
    from elastic_sps.services.ensemble.supervisor import up

    configure_logging("up")
    replace = parse_replacements(args.replace)
    preflight(args.topology, args.events)
    with up(
        args.topology,
        Path(args.out),
        args.policy,
        args.predictor,
        args.tau_ms,
        extra_env=goal_env(args),
        replace=replace,
        with_prometheus=args.prometheus,
        events_file=args.events,
        fresh=args.fresh,
    ) as ens:
        print(f"kafka {ens.bootstrap}  redis {ens.redis_url}")
        if ens.prometheus_url:
            print(f"prometheus {ens.prometheus_url}")
        for name, url in ens.urls().items():
            print(f"{name:9s} {url}")
        print("running; Ctrl-C stops everything", flush=True)
        try:
            while ens.failed is None:
                time.sleep(0.5)
            print(f"stopped: {ens.failed}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("stopping...", flush=True)
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    """Why an operator had the replicas it had: the run's decisions.jsonl, in words."""
    from pathlib import Path

    from elastic_sps.control.explain import describe, describe_move, find

    path = Path(args.run) / "decisions.jsonl"
    if not path.exists():
        raise CliError(f"{path} does not exist: is {args.run} a run folder of up or demo?")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    hits = find(rows, args.operator, args.interval)
    if not hits:
        known = sorted({d["interval"] for d in rows})
        span = f"{known[0]}-{known[-1]}" if known else "none"
        raise CliError(f"no decision for that operator and interval (intervals: {span})")
    print("\n\n".join(describe(d) for d in hits))
    moves_file = Path(args.run) / "rescales.json"
    moves = json.loads(moves_file.read_text()) if moves_file.exists() else []
    moves = [m for m in moves if "moved_partitions" in m]
    moves = [m for m in moves if args.operator is None or m["operator"] == args.operator]
    if moves:
        print("\nstate moved:\n" + "\n".join(describe_move(m) for m in moves))
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from elastic_sps.model import topology, traces
    from elastic_sps.services.ensemble.demo import input_topic
    from elastic_sps.services.ensemble.replay import played, replay
    from elastic_sps.settings import ServiceSettings

    settings = ServiceSettings()
    topo = topology.load(args.topology)
    ticks = played(traces.load(args.trace), args.speedup, args.peak_rate)
    topic = input_topic(topo, settings.topics)
    sent = replay(
        args.bootstrap or settings.kafka_bootstrap_servers,
        topic,
        topo,
        ticks,
        events_file=args.events,
    )
    print(f"sent {sent} events to {topic}")
    return 0


def cmd_service(args: argparse.Namespace) -> int:
    """Run one service in this process (configured by SPS_* environment variables)."""
    import runpy

    runpy.run_module(f"elastic_sps.services.{args.name}", run_name="__main__", alter_sys=True)
    return 0


def cmd_benchmark(args: argparse.Namespace) -> int:
    """Each operator's execution time and CPU share on sample events (what the dataplane
    measures at start when a topology leaves ``et_ms`` out)."""
    from elastic_sps.model import topology
    from elastic_sps.pipeline import costs
    from elastic_sps.pipeline.samples import sample_payloads

    preflight(args.topology, args.events)
    topo = topology.load(args.topology)
    samples = sample_payloads(topo, args.events)
    if samples is None:
        raise ValueError(f"{args.topology} names no sample events: pass --events FILE")
    measured = costs.measure(topo, samples, max_events=args.max_events)
    declared = topo.declared
    rows = [
        {
            **c.__dict__,
            "declared_et_ms": declared[c.operator].et_ms,
            "cpu_bound": c.cpu_share >= 0.5,
        }
        for c in measured.values()
    ]
    rows += chain_rows(topo.with_costs(costs.as_costs(measured)))
    if args.json:
        print(json.dumps(rows))
        return 0
    print(f"{'operator':20s} {'et_ms':>9s} {'cpu share':>9s} {'events':>7s} {'raised':>7s}  kind")
    for r in rows:
        kind = "cpu-bound (replicas = tasks, up to the cores)" if r["cpu_bound"] else "waiting"
        if "members" in r:
            kind += f"; chains {', '.join(r['members'])}"
        events = f"{r['events']:7d} {r['failed']:7d}" if "events" in r else f"{'':15s}"
        print(f"{r['operator']:20s} {r['et_ms']:9.4f} {r['cpu_share']:9.2f} {events}  {kind}")
    return 0


def chain_rows(topo: Any) -> list[dict[str, Any]]:
    """A chained topology's chains, their et and CPU share from their members'."""
    return [
        {
            "operator": op.name,
            "et_ms": op.et_ms,
            "cpu_share": op.cpu_share or 0.0,
            "cpu_bound": op.cpu_bound,
            "members": [m.name for m in op.members],
        }
        for op in topo.operators
        if op.members
    ]


def cmd_rescale(args: argparse.Namespace) -> int:
    """Publish an on-demand request for the execute service on sps.requests."""
    from elastic_sps.services.execute.client import send_rescale
    from elastic_sps.settings import ServiceSettings

    settings = ServiceSettings()
    req = send_rescale(
        args.bootstrap or settings.kafka_bootstrap_servers,
        args.operator,
        args.replicas,
        add=args.add,
        remove=args.remove,
        input_eps=args.input_eps,
    )
    print(f"request {req.request_id} sent to {settings.topics.requests}")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("demo", help="the whole ensemble on a spike trace, with a report")
    p.add_argument("--topology", default="twitter_remote", help=TOPOLOGY_HELP)
    p.add_argument("--trace", default="short-spikes", help=TRACE_HELP)
    p.add_argument("--duration", type=float, default=120.0, help="seconds of replay")
    p.add_argument("--policy", default=DEFAULT_POLICY, help=POLICY_HELP)
    p.add_argument("--predictor", default=DEFAULT_PREDICTOR, help=PREDICTOR_HELP)
    p.add_argument("--peak-rate", type=float, help="default: the rate needing ~80%% of the pool")
    p.add_argument("--tau-ms", type=float, help="LAS queuing-latency goal (default: no shedding)")
    p.add_argument("--out", help="run folder (default runs/demo-<time>)")
    p.add_argument("--simulate", action="store_true", help="simulator comparison only")
    p.add_argument(
        "--warmup",
        type=float,
        help="seconds of traffic at a quarter of the peak before the replay (default 10; "
        "not measured)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    _events_argument(p)
    _cycle_argument(p)
    _goal_arguments(p)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("up", help="start the ensemble on this machine until Ctrl-C")
    p.add_argument("--topology", default="twitter_remote", help=TOPOLOGY_HELP)
    p.add_argument("--policy", default=DEFAULT_POLICY, help=POLICY_HELP)
    p.add_argument("--predictor", default=DEFAULT_PREDICTOR, help=PREDICTOR_HELP)
    p.add_argument("--tau-ms", type=float, help="LAS queuing-latency goal (default: no shedding)")
    p.add_argument("--out", default="runs/up", help="run folder (logs, decisions, outputs)")
    p.add_argument(
        "--replace",
        action="append",
        default=[],
        metavar="NAME=COMMAND",
        help="run COMMAND instead of service NAME, e.g. analyze='python -m threshold_analyze'",
    )
    p.add_argument(
        "--prometheus", action="store_true", help="also run Prometheus scraping every service"
    )
    p.add_argument(
        "--fresh",
        action="store_true",
        help="start a new deployment (default: go on with the run folder's last one of the "
        "same pipeline: its state and read positions)",
    )
    _events_argument(p)
    _goal_arguments(p)
    p.set_defaults(func=cmd_up)

    p = sub.add_parser("explain", help="why an operator had its replicas in an interval")
    p.add_argument("--run", required=True, help="the run folder (up --out, demo --out)")
    p.add_argument("--operator", help="one operator (default: all)")
    p.add_argument("--interval", type=int, help="one interval (default: all)")
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("replay", help="produce a trace's events into the source topic")
    p.add_argument("--topology", default="twitter_remote", help=TOPOLOGY_HELP)
    p.add_argument("--trace", default="short-spikes", help=TRACE_HELP)
    p.add_argument("--peak-rate", type=float, help="rescale so the trace peaks at this events/s")
    p.add_argument("--speedup", type=float, default=1.0, help="play the trace this much faster")
    p.add_argument("--bootstrap", help="default SPS_KAFKA_BOOTSTRAP_SERVERS")
    _events_argument(p)
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("benchmark", help="measure each operator's et_ms and CPU share")
    p.add_argument("--topology", required=True, help="built-in name or YAML file")
    _events_argument(p, produced=False)
    p.add_argument("--max-events", type=int, default=500, help="events per operator")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=cmd_benchmark)

    p = sub.add_parser("service", help="run one MAPE service (settings from SPS_* variables)")
    p.add_argument("name", choices=SERVICES, help="the service to run")
    p.set_defaults(func=cmd_service)

    p = sub.add_parser("rescale", help="ask execute for an on-demand change")
    p.add_argument("--operator", help="one operator; without it --add/--remove use Stela ETP")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--replicas", type=int, help="set the operator's active replicas to N")
    g.add_argument("--add", type=int, help="add N replicas (to --operator, or where ETP says)")
    g.add_argument("--remove", type=int, help="remove N replicas (likewise)")
    p.add_argument("--input-eps", type=float, help="input rate for the ETP computation")
    p.add_argument("--bootstrap", help="Kafka bootstrap (default SPS_KAFKA_BOOTSTRAP_SERVERS)")
    p.set_defaults(func=cmd_rescale)
