"""CPU-bound replicas are capacity up to the cores: one saturated user operator doing
2 ms of real pure-Python CPU work per event (``benchmarks/harness/cpu_work.py``, its cost and
CPU share measured by the dataplane at start), at r = 1, 2, 8 active replicas, in one run
on one dataplane (embedded broker, redis-server, Spark local). The operator is CPU-bound,
so each replica gets its own Spark task (a process) up to the machine's cores, and the
rest share those tasks as threads; and the plan counts on no more than the cores hold.

Target (issue 27, this 2-core machine kind): r = 2 ≥ 1.7 × r = 1; r = 8 ≥ r = 2.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_cpu_replicas.py [--seconds 4] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from benchmarks.harness.capacity import CPU_CODE, OPERATOR, capacity_rig
from elastic_sps.control.plan import make_plan
from elastic_sps.io import embedded
from elastic_sps.model import topology
from elastic_sps.policies.base import Analysis, OperatorDecision


def plan_for_eight(topo_path: Path, redis_url: str, prefix: str) -> dict:
    """What the plan makes of a need of 8 replicas for the measured operator."""
    import redis

    from elastic_sps.pipeline.costs import resolved

    topo = resolved(topology.load(topo_path), redis.Redis.from_url(redis_url), prefix, 10)
    need = {OPERATOR: OperatorDecision(8, 8000.0, 8.0)}
    plan = make_plan(topo, Analysis(0, 8000.0, need), {OPERATOR: 1}, 1.0, cores=os.cpu_count())
    return {
        "et_ms": topo[OPERATOR].et_ms,
        "cpu_share": topo[OPERATOR].cpu_share,
        "asked": 8,
        "chosen": plan.targets[OPERATOR],
        "limited_by": plan.limited.get(OPERATOR),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=4.0, help="work per measurement")
    ap.add_argument("--replicas", default="1,2,8")
    ap.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds first")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    counts = [int(x) for x in args.replicas.split(",")]
    rows = []
    with (
        embedded.kafka_broker() as bootstrap,
        embedded.redis_server() as redis_url,
        tempfile.TemporaryDirectory() as folder,
        capacity_rig(bootstrap, redis_url, Path(folder), 2.0, code=CPU_CODE) as rig,
    ):
        decision = plan_for_eight(Path(folder) / "capacity.yaml", redis_url, rig.keys.prefix)
        if args.warmup > 0:
            rig.measure(2, args.warmup)
        for r in counts:
            rows.append({"replicas": r, "events_per_s": round(rig.measure(r, args.seconds))})
    base = rows[0]["events_per_s"]
    for row in rows:
        row["of_r1"] = round(row["events_per_s"] / base, 2)
    out = {"cores": os.cpu_count(), "rows": rows, "plan_for_8": decision}
    if args.json:
        print(json.dumps(out))
        return
    print(f"cores {out['cores']}; measured {decision}")
    for row in rows:
        print(f"r={row['replicas']}: {row['events_per_s']} events/s = {row['of_r1']} x r=1")


if __name__ == "__main__":
    main()
