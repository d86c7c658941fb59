"""MAPE latency: interval close -> new replica counts in Redis, 10-operator topology, td = 1 s.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_mape_latency.py [--intervals 60]
Starts the embedded broker, a redis-server and the four services as processes; feeds
sps.metrics in real time (a spike every 15 s) and reads sps.actions.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml
from confluent_kafka import Producer

from benchmarks.harness.processes import ServiceProcess
from benchmarks.harness.recorded import chain_interval
from elastic_sps.io import embedded
from elastic_sps.io.kafka_admin import ensure_topics
from elastic_sps.io.kafka_io import read_topic as read_all
from elastic_sps.io.topics import Topics
from elastic_sps.model.topology import Operator, linear


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--intervals", type=int, default=60)
    args = ap.parse_args()
    topo = linear("ten", [Operator(f"op{k}", 0.5 + 0.2 * k, 1, 8) for k in range(10)])
    path = Path(tempfile.mkdtemp()) / "ten.yaml"
    path.write_text(yaml.safe_dump(topo.to_dict()))
    topics = Topics()
    with embedded.kafka_broker() as bootstrap, embedded.redis_server() as redis_url:
        ensure_topics(bootstrap, topics.control())
        env = {
            "SPS_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "SPS_REDIS_URL": redis_url,
            "SPS_TD": "1",
            "SPS_TOPOLOGY": str(path),
            "SPS_CLOSE_GRACE_S": "0.05",
        }
        procs = [ServiceProcess(n, env).start() for n in ("monitor", "analyze", "plan", "execute")]
        try:
            for p in procs:
                p.wait_healthy()
            time.sleep(5)
            producer = Producer(
                {"bootstrap.servers": bootstrap, "batch.num.messages": 1, "linger.ms": 0}
            )
            start = math.floor(time.time()) + 1
            for k in range(args.intervals):
                interval = start + k
                time.sleep(max(0.0, interval + 0.9 - time.time()))  # report near the end
                rate = 2000.0 if (k // 15) % 2 else 400.0
                recs = chain_interval(topo.names, interval, rate)
                for r in recs:
                    producer.produce(topics.metrics, value=r.model_dump_json())
                producer.flush()
            time.sleep(4)
            actions = [a for a in read_all(bootstrap, topics.actions) if a["status"] == "applied"]
        finally:
            for p in procs:
                p.stop()
    from_close = np.array([a["plan_latency_s"] for a in actions])
    from_end = np.array([a["applied_at"] - (int(a["plan_id"].split("-")[1]) + 1) for a in actions])
    print(
        json.dumps(
            {
                "operators": 10,
                "td_s": 1,
                "plans_applied": len(actions),
                "close_to_redis_ms_median": round(1000 * float(np.median(from_close)), 1),
                "close_to_redis_ms_p99": round(1000 * float(np.percentile(from_close, 99)), 1),
                "interval_end_to_redis_ms_median": round(1000 * float(np.median(from_end)), 1),
                "interval_end_to_redis_ms_p99": round(1000 * float(np.percentile(from_end, 99)), 1),
            }
        )
    )


if __name__ == "__main__":
    main()
