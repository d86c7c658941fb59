"""Capacity follows replicas: one saturated operator in ``wait`` mode (et = 5 ms, so a
replica's capacity is 200 events/s) processes ≥ 0.8 × r × 200 events/s for r = 1, 2, 4, 8,
all measured in one run on one dataplane (embedded broker, redis-server, Spark local).

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_capacity.py [--seconds 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from benchmarks.harness.capacity import capacity_rig
from elastic_sps.io import embedded


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0, help="work per measurement")
    ap.add_argument("--et-ms", type=float, default=5.0)
    ap.add_argument("--replicas", default="1,2,4,8")
    ap.add_argument(
        "--warmup",
        type=float,
        default=4.0,
        help="seconds of unmeasured work first: a run's first measurement paid for the "
        "JVM and the workers warming up (r = 1 first: 0.75 of ideal; last: 0.86)",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    counts = [int(x) for x in args.replicas.split(",")]
    rows = []
    with (
        embedded.kafka_broker() as bootstrap,
        embedded.redis_server() as redis_url,
        tempfile.TemporaryDirectory() as folder,
        capacity_rig(bootstrap, redis_url, Path(folder), args.et_ms) as rig,
    ):
        if args.warmup > 0:
            rig.measure(max(counts), args.warmup)
        for r in counts:
            eps = rig.measure(r, args.seconds)
            ideal = r * 1000.0 / args.et_ms
            rows.append({"replicas": r, "events_per_s": round(eps), "of_ideal": eps / ideal})
    if args.json:
        print(json.dumps(rows))
        return
    for row in rows:
        print(
            f"r={row['replicas']}: {row['events_per_s']} events/s = "
            f"{row['of_ideal']:.2f} x r x {1000 / args.et_ms:.0f}"
        )


if __name__ == "__main__":
    main()
