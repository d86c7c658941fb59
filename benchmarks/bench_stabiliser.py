"""The calm stabiliser (elastic_sps.control.stabilise.CALM: a 3-interval scale-down window
that follows a steady fall, a 0.35 replica margin, no scale-in while a backlog is caught up,
a scale-up tolerance of 0.35 replica or 0.25 x count, a scale-down tolerance of 0.15 x count)
against each policy as written, in the simulator, on the same traces.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_stabiliser.py [--policies a,b] [--traces x,y]
(default pa-sps:lr,pa-sps:basic on short-spikes,pasps-twitter,pasps-twitter-raw)

Per trace and policy: rescales per hour, processed ratio and saved resources, as written
and calmed, and the issue's targets: at least 50 % fewer rescales, processed ≥ 0.999,
saved resources at most 0.05 below. Deterministic: the same figures on any machine. The
live counterpart: `elastic-sps compare --live --policies pa-sps:lr,pa-sps:lr+calm`.
"""

from __future__ import annotations

import argparse
import json

from elastic_sps.control.stabilise import CALM
from elastic_sps.model import topology, traces
from elastic_sps.policies import make_policy
from elastic_sps.simulation.simulator import simulate


def one(trace: str, spec: str, topo_name: str = "twitter", td: float = 1.0) -> dict[str, object]:
    topo = topology.load(topo_name)
    arrivals = traces.load(trace).per_interval(td)
    runs = {
        label: simulate(topo, arrivals, make_policy(spec, topo), td, stabilisation=rules).metrics
        for label, rules in (("written", None), ("calm", CALM))
    }
    w, c = runs["written"], runs["calm"]
    fewer = 1.0 - c.rescales_per_hour / w.rescales_per_hour if w.rescales_per_hour else 0.0
    return {
        "trace": trace,
        "policy": spec,
        "rescales_per_hour": [round(w.rescales_per_hour), round(c.rescales_per_hour)],
        "processed_ratio": [round(w.processed_ratio, 4), round(c.processed_ratio, 4)],
        "saved_resources": [round(w.saved_resources, 3), round(c.saved_resources, 3)],
        "fewer_rescales": round(fewer, 3),
        "saved_drop": round(w.saved_resources - c.saved_resources, 3),
        "targets_met": fewer >= 0.5
        and c.processed_ratio >= 0.999
        and w.saved_resources - c.saved_resources <= 0.05,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policies", default="pa-sps:lr,pa-sps:basic")
    ap.add_argument("--traces", default="short-spikes,pasps-twitter,pasps-twitter-raw")
    args = ap.parse_args()
    for trace in args.traces.split(","):
        for spec in args.policies.split(","):
            print(json.dumps(one(trace, spec)))


if __name__ == "__main__":
    main()
