"""Scaling before shedding in the simulator: the plan-gated goal shedder against Full
Knowledge (``shared/simulation/sim_shedding.py``), PA-SPS (lr) with the latency goal, twitter.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_shedding_sim.py [--mode event]
Per trace, peak (a multiple of what the full pool holds) and goal: the shed fraction of
each shedder, ours over Full Knowledge's, and the mean latency over the goal (issue
targets, with the peak beyond the pool: latency ≤ 1.25 × goal, shed ≤ 1.25 × Full
Knowledge's; with the pool able to meet the goal: nothing shed). Deterministic.
"""

from __future__ import annotations

import argparse
import json

from elastic_sps.model import topology, traces
from elastic_sps.policies import make_policy
from elastic_sps.simulation.simulator import simulate


def one(trace: str, peak: float, goal_s: float, mode: str) -> dict[str, object]:
    topo = topology.load("twitter")
    arrivals = traces.load(trace).rescaled(peak * topo.capacity_eps()).per_interval(1.0)
    sent = float(arrivals.sum())
    row: dict[str, object] = {"trace": trace, "peak_over_pool": peak, "goal_ms": goal_s * 1e3}
    for shedder in ("goal", "full"):
        m = simulate(
            topo,
            arrivals,
            make_policy("pa-sps:lr", topo),
            1.0,
            latency_goal_s=goal_s,
            shedder=shedder,
            mode=mode,
        ).metrics
        row[shedder] = {
            "shed_fraction": round(m.shed / sent, 4),
            "latency_over_goal": round(m.latency_ms / (goal_s * 1e3), 3),
            "processed_ratio": round(m.processed_ratio, 4),
        }
    full = row["full"]["shed_fraction"]  # type: ignore[index]
    ours = row["goal"]["shed_fraction"]  # type: ignore[index]
    row["shed_over_full"] = round(ours / full, 3) if full else (1.0 if not ours else None)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", default="spikes,short-spikes")
    ap.add_argument("--mode", choices=["fluid", "event"], default="fluid")
    args = ap.parse_args()
    for trace in args.traces.split(","):
        for peak in (0.8, 1.5, 2.5):
            for goal_s in (1.0, 0.25):
                print(json.dumps(one(trace, peak, goal_s, args.mode)), flush=True)


if __name__ == "__main__":
    main()
