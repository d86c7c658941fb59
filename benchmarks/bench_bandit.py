"""pa-sps:bandit (the UCB bandit over the predictors) against each predictor alone, in the
simulator, scored by the bandit's own reward over the whole run.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_bandit.py [--traces a,b,c]
(default spikes,pasps-twitter,pasps-twitter-raw)

Per trace: the reward of every pa-sps:<predictor> run and of pa-sps:bandit, its share of
the best and of the worst single predictor (issue target: ≥ 0.95 of the best, ≥ 1.20 of
the worst), and the arms the bandit chose. Deterministic: the same figures on any machine.
"""

from __future__ import annotations

import argparse
import json
import math

from elastic_sps.control.bandit import RewardBounds, reward
from elastic_sps.model import topology, traces
from elastic_sps.policies import make_policy
from elastic_sps.policies.pa_sps import AUTO_ARMS, PASPSBandit
from elastic_sps.services.cli.simulation import MAX_FITS  # as the CLI: ANN/RF refits per run
from elastic_sps.simulation.simulator import SimulationResult, simulate


def run_reward(r: SimulationResult, goal_ms: float) -> float:
    """The bandit's reward of a whole run, from the paper's metrics of it."""
    bounds = RewardBounds.for_goal(goal_ms)
    m = r.metrics
    return reward(m.latency_ms, m.throughput_degradation, m.saved_resources, bounds=bounds)


def one_trace(name: str, topo_name: str, goal_ms: float, td: float) -> dict[str, object]:
    topo = topology.load(topo_name)
    arrivals = traces.load(name).per_interval(td)
    opts = {
        "retrain_every": max(1, math.ceil(len(arrivals) / MAX_FITS)),
        "latency_goal_ms": goal_ms,
    }
    rewards: dict[str, float] = {}
    chosen: dict[str, int] = {}
    for arm in (*AUTO_ARMS, "bandit"):
        policy = make_policy(f"pa-sps:{arm}", topo, **opts)
        rewards[arm] = round(run_reward(simulate(topo, arrivals, policy, td), goal_ms), 4)
        if isinstance(policy, PASPSBandit):
            for _, a in policy.choices:
                chosen[a] = chosen.get(a, 0) + 1
    singles = {a: rewards[a] for a in AUTO_ARMS}
    best, worst = max(singles.values()), min(singles.values())
    return {
        "trace": name,
        "rewards": rewards,
        "bandit_over_best": round(rewards["bandit"] / best, 3),
        "bandit_over_worst": round(rewards["bandit"] / worst, 3),
        "windows_per_arm": chosen,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", default="spikes,pasps-twitter,pasps-twitter-raw")
    ap.add_argument("--topology", default="twitter")
    ap.add_argument("--goal-ms", type=float, default=5_000.0)
    ap.add_argument("--td", type=float, default=1.0)
    args = ap.parse_args()
    for name in args.traces.split(","):
        print(json.dumps(one_trace(name, args.topology, args.goal_ms, args.td)), flush=True)


if __name__ == "__main__":
    main()
