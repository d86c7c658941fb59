"""Ingress throughput with LAS shedding on (a stable sketch loaded, τ set).

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_ingress.py [--events 200000]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import redis
from confluent_kafka import Producer
from sps_twitter import operators as twitter

from benchmarks.harness.processes import ServiceProcess
from elastic_sps.io import embedded
from elastic_sps.io.connections import kafka_config
from elastic_sps.io.knowledge_base import Keys, KnowledgeBase
from elastic_sps.las.redis_store import SketchPublisher
from elastic_sps.las.sketch import Hashes, SketchPair, key_to_int


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=200_000)
    args = ap.parse_args()
    with embedded.kafka_broker() as bootstrap, embedded.redis_server() as redis_url:
        r = redis.Redis.from_url(redis_url)
        tweets = list(twitter.generate(5000, seed=3))
        pair = SketchPair.empty(Hashes.draw(4, 54, seed=1))
        keys = np.array([key_to_int(t["user"]["screen_name"]) for t in tweets], dtype=np.int64)
        pair.update(keys, 0.0004 * (1 + keys % 5))
        SketchPublisher(r, "parse", Keys()).publish_sketch(pair)
        p = Producer(kafka_config(bootstrap, **{"linger.ms": 20}))
        for k in range(args.events):
            doc = {"id": str(k), "ts": time.time(), "payload": tweets[k % len(tweets)]}
            while True:
                try:
                    p.produce("sps.ingress", json.dumps(doc).encode())
                    break
                except BufferError:
                    p.poll(0.05)
        p.flush()
        env = {
            "SPS_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "SPS_REDIS_URL": redis_url,
            "SPS_TAU_MS": "50",
            "SPS_KEY_FIELD": "user.screen_name",
            "SPS_ADMISSION": "ingress",  # the service measured, whatever auto would pick
        }
        proc = ServiceProcess("ingress", env).start()
        try:
            first = None
            while True:
                got = KnowledgeBase(r).ingress_counts().get("received", 0)
                if got and first is None:
                    first = (time.time(), got)
                if got >= args.events:
                    break
                time.sleep(0.05)
            assert first is not None
            elapsed = time.time() - first[0]
            counts = KnowledgeBase(r).ingress_counts()
        finally:
            proc.stop(timeout=30)
    rate = (args.events - first[1]) / elapsed
    print(json.dumps({"events": args.events, "events_per_s": round(rate), **counts}))


if __name__ == "__main__":
    main()
