"""The LAS goal in the whole ensemble: mean queuing latency against τ, over several runs.

LAS bounds the *entry operator's* queuing latency (admission -> processing there); each
run also prints the end-to-end mean latency, which is what a latency goal promises: in
an overload beyond a downstream operator's pool the two part (docs/measurements.md, "One goal").

Each run starts the embedded ensemble, replays `short-spikes` at the given peak with the
ingress shedding towards τ, drains, and reads the exact mean queuing latency (ingress
admission -> processing at the entry operator, summed over every event).

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_shedding_goal.py \
        --tau-ms 1500 --peak-rate 6000 --runs 3 [--duration 40] [--one-goal]

``--one-goal`` passes the figure as the latency goal (SPS_LATENCY_GOAL_MS) instead of τ:
the plan scales for it and LAS sheds only while the plan is short; each run then also
reports the intervals in which the plan was short and in which the ingress shed.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from elastic_sps.services.ensemble import demo


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tau-ms", type=float, required=True)
    ap.add_argument("--peak-rate", type=float, required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=40.0)
    ap.add_argument("--topology", default="twitter")
    ap.add_argument("--one-goal", action="store_true", help="the goal, not τ (see above)")
    args = ap.parse_args()
    goal = {"SPS_LATENCY_GOAL_MS": str(args.tau_ms)} if args.one_goal else {}
    ratios = []
    for k in range(args.runs):
        out = demo.run(
            topology=args.topology,
            trace_name="short-spikes",
            duration=args.duration,
            live=False,
            run_dir=Path(tempfile.mkdtemp(prefix="sps-tau-")),
            tau_ms=None if args.one_goal else args.tau_ms,
            peak_rate=args.peak_rate,
            drain_s=90,
            extra_env=goal,
            compare_static=False,
        )
        rep = out["report"]
        ratio = rep["queuing_ms_mean"] / args.tau_ms
        ratios.append(ratio)
        keys = [
            *("sent", "warmup_sent", "admitted", "shed", "lost", "shed_ratio"),
            *("queuing_ms_mean", "intervals_short", "intervals_shedding", "replicas_mean"),
            *("latency_ms_mean", "latency_ms_p99"),  # end to end: the goal's own measure
        ]
        # the replay's own shed fraction: the warm-up (a quarter of the default peak) is
        # within the pool, so nothing of it is shed, but it is in `sent`
        replay_shed = rep["shed"] / max(1, rep["sent"] - rep["warmup_sent"])
        row = {n: rep[n] for n in keys} | {"replay_shed_ratio": replay_shed}
        print(json.dumps({"run": k, **row, "ratio_to_tau": ratio}))
    print(
        json.dumps(
            {
                "tau_ms": args.tau_ms,
                "one_goal": args.one_goal,
                "peak_rate": args.peak_rate,
                "runs": args.runs,
                "ratio_mean": float(np.mean(ratios)),
                "ratio_max": float(np.max(ratios)),
                "ratio_min": float(np.min(ratios)),
            }
        )
    )


if __name__ == "__main__":
    main()
