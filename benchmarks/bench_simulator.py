"""Simulator speed: 24 hours of trace at td = 1 s, 4-operator Twitter topology.

Run: .venv/bin/python benchmarks/bench_simulator.py [--predictors lr,ann,rf] [--retrain-every N]
ANN/RF are fitted every N intervals (default 300: 288 fits in a simulated day; the authors'
every-analysis fit would take hours at td = 1 s).
Uses the PA-SPS authors' Twitter trace tiled to 24 h when ../shared/traces is present,
otherwise a generated 24-hour spike workload.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from elastic_sps.model import topology, traces
from elastic_sps.policies import make_policy
from elastic_sps.simulation.simulator import simulate


def day_trace() -> traces.Trace:
    try:
        base = traces.load("pasps-twitter")
        reps = int(np.ceil(86400 / len(base.values)))
        return traces.Trace("pasps-twitter x24h", np.tile(base.values, reps)[:86400], 1.0)
    except traces.TraceError:
        return traces.spike_workload(duration_s=86400, spikes=48, seed=1, name="spikes-24h")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--predictors", default="lr,ann,rf")
    ap.add_argument("--retrain-every", type=int, default=300)
    args = ap.parse_args()
    topo = topology.load("twitter")
    trace = day_trace()
    arrivals = trace.per_interval(1.0)
    for pred in args.predictors.split(","):
        policy = make_policy(f"pa-sps:{pred}", topo, retrain_every=args.retrain_every)
        t0 = time.perf_counter()
        res = simulate(topo, arrivals, policy, 1.0)
        dt = time.perf_counter() - t0
        print(
            json.dumps(
                {
                    "trace": trace.name,
                    "intervals": len(arrivals),
                    "predictor": pred,
                    "seconds": round(dt, 2),
                    "processed_ratio": round(res.metrics.processed_ratio, 5),
                    "saved_resources": round(res.metrics.saved_resources, 3),
                }
            )
        )


if __name__ == "__main__":
    main()
