"""``reproduce``, ``gen-trace``, ``shed-sim``: the papers' experiments and workloads
(no services, no broker)."""

from __future__ import annotations

import argparse
import json
from typing import Any


def cmd_gen_trace(args: argparse.Namespace) -> int:
    from elastic_sps.model import traces

    tr = traces.spike_workload(
        duration_s=args.duration,
        base_eps=args.base,
        spikes=args.spikes,
        height=args.height,
        width_s=args.width,
        ramp_s=args.ramp,
        noise=args.noise,
        seed=args.seed,
    )
    traces.write_csv(tr, args.out)
    print(f"wrote {args.out}: {len(tr.values)} slots, peak {tr.peak_eps:.0f} events/s")
    return 0


def cmd_shed_sim(args: argparse.Namespace) -> int:
    from elastic_sps.las import shed_sim

    setup = shed_sim.Setup(
        distribution=args.distribution,
        items=args.items,
        tuples=args.tuples,
        wn=args.wn,
        wmin_ms=args.wmin_ms,
        wmax_ms=args.wmax_ms,
        underprovision=args.underprovision,
        tau_ms=args.tau_ms if args.tau_ms is not None else (64.0 if args.phases else 6.4),
        window=args.window,
        tolerance=args.tolerance,
        delta=args.delta,
        epsilon=args.epsilon,
        bootstrap=args.bootstrap,
    )
    if args.phases:
        series = shed_sim.phases(setup, args.seed, args.plot)
        if args.json:
            print(json.dumps(series))
        else:
            for kind, s in series.items():
                print(f"{kind:9s} " + " ".join(f"{q:8.1f}" for q in s["window_queuing_ms"]))
        return 0
    if args.sweep:
        points = shed_sim.sweep(args.sweep, setup, args.runs, args.seed)
        if args.plot:
            shed_sim.plot_sweep(args.sweep, points, setup.tau_ms, args.plot)
        if args.json:
            print(json.dumps(points))
        else:
            for point in points:
                print(f"{args.sweep} = {point[args.sweep]}")
                for d in point["shedders"]:
                    print("  " + _shed_line(d))
        return 0
    kinds = shed_sim.SHEDDERS if args.shedder == "all" else (args.shedder,)
    docs = shed_sim.summarise(kinds, setup, args.runs, args.seed)
    if args.json:
        print(json.dumps(docs[0] if len(docs) == 1 else docs))
    else:
        for d in docs:
            print(_shed_line(d))
    return 0


def _shed_line(d: dict[str, Any]) -> str:
    ratio = d["shedding_ratio"]
    return (
        f"{d['shedder']:9s} queuing {d['avg_queuing_latency_ms']:9.2f} ms  "
        f"dropped {d['dropped_ratio']:.4f}  shedding ratio "
        f"{'-' if ratio is None else f'{ratio:+.3f}'}  completion "
        f"{d['avg_completion_latency_ms']:9.2f} ms"
    )


def cmd_reproduce(args: argparse.Namespace) -> int:
    """The paper's scenario on the authors' traces, our figures beside the published."""
    from rich.console import Console
    from rich.table import Table

    from elastic_sps.simulation import reproduce

    names = [t.strip() for t in args.traces.split(",") if t.strip()]
    rows = [
        r for name in names for r in reproduce.run(name, args.retrain_every, engine=args.engine)
    ]
    if args.json:
        print(json.dumps([r.as_dict() for r in rows]))
        return 0
    console = Console(width=200)
    for name in names:
        t = Table(title=f"PA-SPS scenario on {name}: ours | published")
        t.add_column("policy")
        for f in (*reproduce.FIGURES, "error_input", "error_replica"):
            t.add_column(f.replace("_", " "), justify="right")
        for r in (r for r in rows if r.trace == name):
            d = r.as_dict()
            pub = d["published"] or {}
            t.add_row(
                r.policy,
                *(
                    f"{d[f]:.3f} | {pub[f]:.3f}" if pub.get(f) is not None else f"{d[f]:.3f} | -"
                    for f in (*reproduce.FIGURES, "error_input", "error_replica")
                ),
            )
        console.print(t)
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("reproduce", help="the PA-SPS tables beside the published ones")
    p.add_argument("paper", choices=["pa-sps"], help="the paper whose tables to reproduce")
    p.add_argument(
        "--traces",
        default="pasps-twitter,pasps-twitter-raw,pasps-dns",
        help="the authors' traces (../shared/traces/)",
    )
    p.add_argument("--retrain-every", type=int, help="ANN/RF fit cadence (default: every td)")
    p.add_argument(
        "--engine",
        choices=["ideal", "live"],
        default="ideal",
        help="ideal: the model alone; live: with this project's calibrated engine costs "
        "(elastic_sps.simulation.reproduce.engine_model)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.set_defaults(func=cmd_reproduce)

    p = sub.add_parser("gen-trace", help="write a seeded spike workload CSV")
    p.add_argument("--out", required=True, help="the CSV file to write (timestamp,value)")
    p.add_argument("--duration", type=int, default=3600, help="seconds, one row each")
    p.add_argument("--base", type=float, default=400.0, help="events/s between spikes")
    p.add_argument("--spikes", type=int, default=3, help="how many spikes")
    p.add_argument("--height", type=float, default=4.0, help="a spike's peak, x the base")
    p.add_argument("--width", type=int, default=180, help="a spike's seconds at its peak")
    p.add_argument("--ramp", type=int, default=30, help="seconds up to and down from a peak")
    p.add_argument("--noise", type=float, default=0.05, help="relative Gaussian noise per row")
    p.add_argument("--seed", type=int, default=0, help="random seed (same seed, same CSV)")
    p.set_defaults(func=cmd_gen_trace)

    p = sub.add_parser("shed-sim", help="LAS and its baselines in the paper's setup (virtual time)")
    p.add_argument(
        "--shedder",
        default="las",
        choices=["las", "strawman", "baseline", "full", "all"],
        help="the shedder (full: Full Knowledge; all: each in turn)",
    )
    p.add_argument(
        "--distribution", default="zipf-1.0", help="item frequencies: uniform or zipf-<s>"
    )
    p.add_argument("--items", type=int, default=4096, help="distinct items (keys)")
    p.add_argument("--tuples", type=int, default=32768, help="tuples in the stream")
    p.add_argument("--wn", type=int, default=64, help="distinct execution times (§5.1)")
    p.add_argument("--wmin-ms", type=float, default=0.1, help="the cheapest item's cost")
    p.add_argument("--wmax-ms", type=float, default=6.4, help="the dearest item's cost")
    p.add_argument(
        "--underprovision", type=float, default=0.25, help="share of the load above capacity"
    )
    p.add_argument("--tau-ms", type=float, help="goal (default 6.4; 64 with --phases)")
    p.add_argument("--window", type=int, default=1024, help="LAS window N")
    p.add_argument("--tolerance", type=float, default=0.05, help="LAS tolerance mu")
    p.add_argument("--delta", type=float, default=0.1, help="count-min sketch δ")
    p.add_argument("--epsilon", type=float, default=0.05, help="count-min sketch ε")
    p.add_argument(
        "--bootstrap",
        choices=["declared", "nop", "oracle"],
        default="declared",
        help="before the first sketch: charge the operator's declared cost (default), NOP "
        "as Listing 3.2, or the stream's true mean (an oracle, to compare)",
    )
    p.add_argument("--seed", type=int, default=0, help="random seed of the first run")
    p.add_argument("--runs", type=int, default=1, help="runs, seeds seed..seed+runs-1")
    p.add_argument("--phases", action="store_true", help="the Fig. 6 time series (phases A-G)")
    p.add_argument(
        "--sweep",
        choices=["underprovision", "distribution"],
        help="Fig. 4 (under-provisioning 90 %% to -10 %%) or Fig. 5 (uniform to Zipf-3.0): "
        "every shedder at each value, --runs streams each",
    )
    p.add_argument("--plot", help="with --phases or --sweep: a PNG of the figure (Fig. 6, 4 or 5)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_shed_sim)
