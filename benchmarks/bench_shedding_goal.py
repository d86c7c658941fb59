"""The LAS goal in the whole ensemble: mean queuing latency against τ, over several runs.

Each run starts the embedded ensemble, replays `short-spikes` at the given peak with the
ingress shedding towards τ, drains, and reads the exact mean queuing latency (ingress
admission -> processing at the entry operator, summed over every event).

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_shedding_goal.py \
        --tau-ms 1500 --peak-rate 6000 --runs 3 [--duration 40]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from services.ensemble import demo


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tau-ms", type=float, required=True)
    ap.add_argument("--peak-rate", type=float, required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=40.0)
    ap.add_argument("--topology", default="twitter")
    args = ap.parse_args()
    ratios = []
    for k in range(args.runs):
        out = demo.run(
            topology=args.topology,
            trace_name="short-spikes",
            duration=args.duration,
            live=False,
            run_dir=Path(tempfile.mkdtemp(prefix="sps-tau-")),
            tau_ms=args.tau_ms,
            peak_rate=args.peak_rate,
            drain_s=90,
        )
        rep = out["report"]
        ratio = rep["queuing_ms_mean"] / args.tau_ms
        ratios.append(ratio)
        keys = ("sent", "admitted", "shed", "lost", "shed_ratio", "queuing_ms_mean")
        print(json.dumps({"run": k, **{n: rep[n] for n in keys}, "ratio_to_tau": ratio}))
    print(
        json.dumps(
            {
                "tau_ms": args.tau_ms,
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
