"""Simulator speed at scale: a generated 100-operator DAG with pools of 50 (5,000
replicas), 24 hours at td = 5 s (17,280 intervals), PA-SPS with LR, fluid mode.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_simulator_dag.py [--operators N]
The PA-SPS authors' Twitter trace tiled to 24 h (a generated spike day without it),
summed per 5 s and scaled so its peak is 80 % of what the full pool sustains.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from benchmarks.bench_simulator import day_trace
from elastic_sps.model.synthetic import generated_dag
from elastic_sps.policies import make_policy
from elastic_sps.simulation.simulator import simulate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--operators", type=int, default=100)
    ap.add_argument("--pool", type=int, default=50)
    ap.add_argument("--td", type=float, default=5.0)
    ap.add_argument("--policy", default="pa-sps:lr")
    args = ap.parse_args()
    topo = generated_dag(args.operators, args.pool, seed=1)
    arrivals = day_trace().per_interval(args.td)
    arrivals = arrivals * (0.8 * topo.capacity_eps() * args.td / float(np.max(arrivals)))
    policy = make_policy(args.policy, topo)
    t0 = time.perf_counter()
    res = simulate(topo, arrivals, policy, args.td)
    seconds = time.perf_counter() - t0
    doc = {
        "topology": topo.name,
        "replicas": topo.pool_total,
        "intervals": len(arrivals),
        "policy": args.policy,
        "seconds": round(seconds, 2),
        "processed_ratio": round(res.metrics.processed_ratio, 5),
        "saved_resources": round(res.metrics.saved_resources, 3),
    }
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
