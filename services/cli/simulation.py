"""``simulate``, ``compare``, ``gen-trace``, ``shed-sim``: the trace-driven simulators
(no services, no broker)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from collections.abc import Sequence
from typing import Any

PREDICTOR_HELP = (
    "pa-sps's forecast: basic, lr, fft, ann, rf, ann-lag, rf-lag, auto (the recently most "
    "accurate) or bandit; PREDICTOR@U sizes replicas at utilisation U, e.g. basic@0.7"
)
POLICY_HELP = (
    "pa-sps, presps, ds2, autoscale, stela, lag[:ms], reactive, static:N or default (the "
    "services' own); ds2@U, autoscale@U, reactive@U at utilisation target U"
)
TOPOLOGY_HELP = "a built-in topology's name or a YAML file"
TRACE_HELP = "a bundled trace's name (spikes, short-spikes, flash-crowd) or a CSV file"
MAX_FITS = 100  # ANN/RF fits per simulated run unless --retrain-every says otherwise


def _add_run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--topology",
        help="built-in name or YAML file (default twitter; with --live twitter_remote)",
    )
    p.add_argument("--trace", default="spikes", help=TRACE_HELP)
    p.add_argument("--td", type=float, default=1.0, help="interval length in seconds")
    p.add_argument("--peak-rate", type=float, help="rescale so the trace peaks at EPS events/s")
    p.add_argument("--slot-seconds", type=float, default=1.0, help="seconds per trace row")
    p.add_argument("--seed", type=int, default=0, help="random seed of the arrivals")
    p.add_argument("--budget", type=int, help="global cap on active replicas (Stela ETP)")
    p.add_argument(
        "--latency-goal-ms",
        type=float,
        help="the plan raises each need to clear the backlog within it (elastic_sps.control.plan)",
    )
    p.add_argument("--budget-schedule", help="on-demand budget changes, e.g. 0:32,1200:16 (s:N)")
    p.add_argument(
        "--retrain-every",
        type=int,
        help="ANN/RF: fit every N analyses (default: every analysis, as the authors, up to "
        f"{MAX_FITS} fits a run; a longer run fits evenly {MAX_FITS} times: an ANN fit "
        "costs ~0.3 s)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--plot", help="write a PNG of input, throughput and replicas")
    p.add_argument(
        "--t-out", type=float, help="PA-SPS t_out: events older than SECONDS expire (default off)"
    )
    p.add_argument(
        "--q-size", type=float, help="PA-SPS q_size: an operator queue's limit (default off)"
    )
    add_rule_flags(p)
    p.add_argument(
        "--calm",
        action="store_true",
        help="the measured stabiliser preset (elastic_sps.control.stabilise.CALM: a 3-interval "
        "window, "
        "margin 0.35, --hold-on-backlog, tolerance 0.35 or 0.25 x count, scale-down tolerance "
        "0.15, --follow-falling-need); a policy spec may say it itself: "
        "pa-sps:lr+calm",
    )
    p.add_argument(
        "--shed",
        choices=["goal", "full"],
        help="with --latency-goal-ms: shed at ingress, only while the plan is short (goal, "
        "as the ensemble) or Full Knowledge's least shedding for the goal (full); "
        "shared/simulation/sim_shedding.py",
    )
    p.add_argument(
        "--mode",
        choices=["fluid", "event"],
        default="fluid",
        help="fluid: cohorts of events per interval (fast); event: every event, per-replica "
        "queues, et with variance --et-cv2 (elastic_sps.simulation.event_dataplane; --json adds "
        "events_per_s)",
    )
    p.add_argument(
        "--et-cv2",
        type=float,
        default=0.0,
        help="execution time's squared coefficient of variation (0: deterministic)",
    )
    p.add_argument(
        "--eq7-weight",
        choices=["theta_p", "theta_ip"],
        default="theta_p",
        help="PA-SPS Eq. 7: weigh a predecessor's queue by θ_p (as printed) or θ_i^p (text)",
    )


def _load(args: argparse.Namespace) -> tuple[Any, Any]:
    from elastic_sps.model import topology, traces

    args.topology = args.topology or "twitter"
    topo = topology.load(args.topology)
    trace = traces.load(args.trace, slot_s=args.slot_seconds)
    if args.peak_rate is not None:
        trace = trace.rescaled(args.peak_rate)
    return topo, trace


def _run(args: argparse.Namespace, specs: Sequence[str]) -> list[Any]:
    from elastic_sps.control.stabilise import split_spec
    from elastic_sps.model.engine import EngineModel, Limits
    from elastic_sps.policies import make_policy
    from elastic_sps.simulation.simulator import simulate

    topo, trace = _load(args)
    for flag, v in (("--t-out", args.t_out), ("--q-size", args.q_size)):
        if v is not None and v <= 0:
            raise ValueError(f"{flag} must be > 0, got {v}")
    limits = Limits(t_out_s=args.t_out, q_size=args.q_size)
    rules = stabilisation(args)
    arrivals = trace.per_interval(args.td)
    opts = {
        "predictor": getattr(args, "predictor", None),
        "replicas": getattr(args, "replicas", None),
        "retrain_every": args.retrain_every or max(1, math.ceil(len(arrivals) / MAX_FITS)),
        "td": args.td,
        "seed": args.seed,
        "eq7_weight": args.eq7_weight,
    }
    if args.budget is not None and args.budget < 0:
        raise ValueError(f"--budget must be >= 0, got {args.budget}")
    if args.et_cv2 < 0:
        raise ValueError(f"--et-cv2 must be >= 0, got {args.et_cv2}")
    if args.shed and not args.latency_goal_ms:
        raise ValueError("--shed needs --latency-goal-ms")
    budget_at = _budget_schedule(args.budget_schedule, args.td, args.budget)
    results = []
    for spec in specs:
        name, preset = split_spec(spec)
        policy = make_policy(name, topo, **opts)
        result = simulate(
            topo,
            arrivals,
            policy,
            args.td,
            budget=args.budget,
            budget_at=budget_at,
            limits=limits,
            stabilisation=preset or rules,
            latency_goal_s=goal_s(args),
            engine=EngineModel(et_cv2=args.et_cv2),
            mode=args.mode,
            seed=args.seed,
            shedder=args.shed,
        )
        results.append(dataclasses.replace(result, policy=spec) if preset else result)
    return results


def goal_s(args: argparse.Namespace) -> float | None:
    """--latency-goal-ms in seconds, as the plan takes it (None: no goal)."""
    return args.latency_goal_ms / 1000.0 if args.latency_goal_ms else None


# the stabiliser's rules as flags: their type and default off; the help is the rule's
# one description (elastic_sps.control.stabilise.RULE_HELP)
RULE_FLAGS: dict[str, Any] = {
    "scale_down_window_s": ("--scale-down-window", float, 0.0),
    "max_step": ("--max-step", int, None),
    "scale_down_margin": ("--scale-down-margin", float, 0.0),
    "hold_on_backlog": ("--hold-on-backlog", bool, False),
    "scale_up_tolerance": ("--scale-up-tolerance", float, 0.0),
    "scale_up_tolerance_ratio": ("--scale-up-tolerance-ratio", float, 0.0),
    "scale_down_tolerance_ratio": ("--scale-down-tolerance-ratio", float, 0.0),
    "follow_falling_need": ("--follow-falling-need", bool, False),
}


def add_rule_flags(p: argparse.ArgumentParser) -> None:
    from elastic_sps.control.stabilise import RULE_HELP

    for rule, (flag, kind, default) in RULE_FLAGS.items():
        dest = "scale_down_window" if rule == "scale_down_window_s" else rule
        if kind is bool:
            p.add_argument(flag, dest=dest, action="store_true", help=RULE_HELP[rule])
        else:
            p.add_argument(flag, dest=dest, type=kind, default=default, help=RULE_HELP[rule])


def stabilisation(args: argparse.Namespace) -> Any:
    """The rules the flags give (--calm: the measured preset), as the plan service
    builds its own (``stabilise.build_rules``)."""
    from elastic_sps.control.stabilise import CALM, Stabilisation, build_rules

    if args.scale_down_window < 0 or (args.max_step is not None and args.max_step < 1):
        raise ValueError("--scale-down-window must be >= 0 and --max-step >= 1")
    amounts = (args.scale_down_margin, args.scale_up_tolerance, args.scale_up_tolerance_ratio)
    if min(amounts) < 0 or not 0 <= args.scale_down_tolerance_ratio < 1:
        raise ValueError(
            "--scale-down-margin, --scale-up-tolerance(-ratio) must be >= 0 and "
            "--scale-down-tolerance-ratio in [0, 1)"
        )
    if getattr(args, "calm", False):
        return CALM
    rules = {r: getattr(args, r) for r in RULE_FLAGS if r != "scale_down_window_s"}
    return build_rules(Stabilisation(), args.td, args.scale_down_window, **rules)


def _budget_schedule(text: str | None, td: float, default: int | None) -> Any:
    """``0:32,1200:16`` -> a function of the interval index giving the budget in force."""
    if not text:
        return None
    steps = []
    for part in text.split(","):
        at, _, n = part.partition(":")
        try:
            steps.append((float(at), int(n)))
        except ValueError:
            raise ValueError(f"--budget-schedule: {part!r} is not SECONDS:REPLICAS") from None
        if steps[-1][1] < 0:
            raise ValueError(f"--budget-schedule: negative budget in {part!r}")
    steps.sort()

    def budget_at(t: int) -> int | None:
        cur = default
        for start, n in steps:
            if t * td >= start:
                cur = n
        return cur

    return budget_at


def _emit(args: argparse.Namespace, results: list[Any], as_list: bool) -> None:
    from elastic_sps.simulation import report

    if args.plot:
        report.plot(results, args.plot)
    if args.json:
        docs = [
            {"policy": r.policy, "mode": r.mode, **r.metrics.as_dict()}
            | ({"events_per_s": round(r.events_per_s)} if r.events_per_s else {})
            for r in results
        ]
        print(json.dumps(docs if as_list else docs[0], indent=None))
    else:
        report.print_table(results, f"{args.topology} / {args.trace} / td={args.td}s")


def cmd_simulate(args: argparse.Namespace) -> int:
    spec = args.policy
    if spec == "pa-sps" and args.predictor:
        spec = f"pa-sps:{args.predictor}"
    _emit(args, _run(args, [spec]), as_list=False)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from elastic_sps.policies import default_comparison

    if args.live:
        return cmd_compare_live(args)
    specs = args.policies.split(",") if args.policies else default_comparison()
    results = _run(args, [s.strip() for s in specs if s.strip()])
    if not args.policies:
        from elastic_sps.simulation.scoring import rank

        results = rank(results)
    _emit(args, results, as_list=True)
    return 0


def compare_args(**given: Any) -> argparse.Namespace:
    """``compare``'s arguments with their defaults and ``given`` over them: for a caller in
    code (``demo --simulate``), so the defaults live in one place, the parser."""
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["compare"])
    vars(args).update(given)
    return args


LIVE_DEFAULT = "static:1,static:8,pa-sps:basic,pa-sps:lr,ds2"


def cmd_compare_live(args: argparse.Namespace) -> int:
    """Each policy on the live ensemble (one ``up`` per policy), the simulator's forecast
    of the same run beside it."""
    import time
    from pathlib import Path

    from elastic_sps.model import topology
    from elastic_sps.services.cli.develop import preflight
    from elastic_sps.services.ensemble import live_compare
    from elastic_sps.services.ensemble.supervisor import measured_topology

    preflight(args.topology or "twitter_remote", args.events)
    out = Path(args.out or f"runs/compare-live-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    # a topology without et_ms: measured once, and every run and forecast uses that file
    args.topology = measured_topology(args.topology or "twitter_remote", out, args.events)
    topo = topology.load(args.topology)
    if args.peak_rate is None:
        from elastic_sps.services.ensemble.demo import default_peak

        args.peak_rate = default_peak(topo)
    sc = live_compare.Scenario(args.topology, args.trace, args.duration, args.peak_rate, args.td)
    specs = [x.strip() for x in (args.policies or LIVE_DEFAULT).split(",") if x.strip()]
    env = {"SPS_T_OUT_S": str(args.t_out)} if args.t_out else {}
    if args.latency_goal_ms:  # the one goal, as `demo --latency-goal-ms`
        env["SPS_LATENCY_GOAL_MS"] = str(args.latency_goal_ms)
    rules = stabilisation(args)
    rows = live_compare.run(
        sc,
        specs,
        out,
        extra_env=env,
        drain_s=args.drain,
        warmup_s=args.warmup,
        t_out_s=args.t_out,
        stabilisation=rules if rules.enabled else None,
        latency_goal_s=goal_s(args),
        events_file=args.events,
    )
    (out / "compare-live.json").write_text(json.dumps(rows, indent=1))
    png = live_compare.plot(rows, Path(args.plot) if args.plot else out / "compare-live.png")
    if args.json:
        print(json.dumps([{k: r[k] for k in ("policy", "live", "simulated", "gap")} for r in rows]))
    else:
        live_compare.print_table(rows)
        print(f"plot: {png}")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("simulate", help="run one policy on a trace in the simulator")
    _add_run_args(p)
    p.add_argument("--policy", default="pa-sps", help="pa-sps, presps, static, ... (name[:arg])")
    p.add_argument("--predictor", help=PREDICTOR_HELP)
    p.add_argument("--replicas", type=int, help="static: replicas per operator")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("compare", help="run several policies on the same trace")
    _add_run_args(p)
    p.add_argument("--policies", help="comma-separated, e.g. pa-sps:lr,static:8 (default: all)")
    p.add_argument("--live", action="store_true", help="run each policy on the live ensemble")
    p.add_argument("--duration", type=float, default=90.0, help="--live: seconds of replay")
    p.add_argument("--out", help="--live: run folder (default runs/compare-live-<time>)")
    p.add_argument("--drain", type=float, default=150.0, help="--live: max drain seconds")
    p.add_argument(
        "--warmup",
        type=float,
        help="--live: seconds of traffic at a quarter of the peak before each replay "
        "(default 10; not measured)",
    )
    p.add_argument(
        "--events",
        metavar="FILE",
        help="--live: JSON lines of payloads, produced as plain records to the source topic",
    )
    p.set_defaults(func=cmd_compare)
