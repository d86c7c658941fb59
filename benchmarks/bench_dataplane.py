"""Dataplane throughput, the cost of the elastic source, and how soon a resize takes effect.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_dataplane.py [--events 30000]
Twitter application, synthetic cost off, embedded broker and redis-server, local[2].
Both variants run in this one invocation: the elastic source (active count read from
Redis every micro-batch) and the same pipeline with the count hard-coded.

``--cluster``: instead, the elastic pipeline in one JVM (``local[N]``) and on a
two-executor cluster (``local-cluster[2,1,1024]``, two tasks per operator and batch), in
one invocation: the cost of distribution as a ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
import uuid
from typing import Any

import redis
from sps_twitter import operators as twitter

from benchmarks.harness.processes import ServiceProcess
from elastic_sps.contracts.plan import PlanRecord
from elastic_sps.io import embedded, id_ledger
from elastic_sps.io.envelope import Envelope
from elastic_sps.io.knowledge_base import Keys, KnowledgeBase
from elastic_sps.io.tracked_producer import TrackedProducer
from elastic_sps.model import topology
from elastic_sps.services.execute.core import Executor

START_REPLICAS = 2  # every operator's count at the start, and the fixed variant's
CLUSTER = {"SPS_SPARK_MASTER": "local-cluster[2,1,1024]", "SPS_TASKS_PER_QUERY": "2"}


def run_once(
    bootstrap: str, redis_url: str, n: int, fixed: bool, extra_env: dict[str, str] | None = None
) -> dict[str, float]:
    tag = uuid.uuid4().hex[:6]
    keys = Keys(tag)
    env = {
        "SPS_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "SPS_REDIS_URL": redis_url,
        "SPS_KEY_PREFIX": tag,
        "SPS_TRACK_IDS": "true",
        "SPS_CHECKPOINT_DIR": f"/tmp/sps-bench-{tag}",
        "SPS_TOPOLOGY": "twitter",
        "SPS_ADMISSION": "ingress",  # fed on the entry operator's topic, as the ingress would
        **(extra_env or {}),
    }
    if fixed:
        env["SPS_FIXED_REPLICAS"] = str(START_REPLICAS)
    r = redis.Redis.from_url(redis_url)
    for op in topology.load("twitter").names:
        r.set(keys.active(op), START_REPLICAS)
    # its own process group: stop() takes Spark's JVM and workers along
    proc = ServiceProcess("dataplane", env).start()
    try:
        while not KnowledgeBase(r, tag).runs():
            if not proc.alive():
                raise RuntimeError(proc.log.read_text()[-3000:])
            time.sleep(0.2)
        # warm the Python workers with a small batch first
        p = TrackedProducer(bootstrap, r, keys)
        tweets = list(twitter.generate(n + 500, seed=2))
        for k in range(500):
            p.produce(
                keys.topic("parse"),
                Envelope(f"w{k}", time.time(), "source", tweets[k]).encode(),
                partition=k % 2,
            )
        p.flush()
        while r.scard(id_ledger.key(tag, "store", "processed")) < 500:
            time.sleep(0.1)
        t0 = time.time()
        for k in range(n):
            p.produce(
                keys.topic("parse"),
                Envelope(f"e{k}", time.time(), "source", tweets[500 + k]).encode(),
                partition=k % 2,
            )
        p.flush()
        while r.scard(id_ledger.key(tag, "store", "processed")) < n + 500:
            time.sleep(0.05)
        elapsed = time.time() - t0
        out: dict[str, float] = {"events_per_s": round(n / elapsed)}
        if not fixed:
            out |= resize_delays(r, keys, p, tweets[0])
        return out
    finally:
        proc.stop(timeout=60)


def resize_delays(r: Any, keys: Keys, p: TrackedProducer, tweet: dict) -> dict[str, float]:
    """classify_content 2 → 1 → 2 → 1 → 2 → 1 while parse receives 200 events/s: each
    change applied by the execute service's own ``Executor`` (the count and its rescale
    marker), then timed to its effect as the rescale timeline records it (the first
    router or batch that uses the new count, ``elastic_sps.io.rescale_timeline``), and to the
    first micro-batch planned with it."""
    ex = Executor(r, topology.load("twitter"), keys)
    stop = threading.Event()

    def trickle() -> None:
        k = 0
        while not stop.wait(0.005):
            ev = Envelope(f"t{k}", time.time(), "source", tweet)
            p.produce(keys.topic("parse"), ev.encode(), partition=k % 2)
            p.p.poll(0)
            k += 1

    feeder = threading.Thread(target=trickle, daemon=True)
    feeder.start()
    time.sleep(3)  # the trickle flows through every operator before the first change
    effect, batch = [], []
    try:
        for k, target in enumerate((1, 2, 1, 2, 1)):
            before = KnowledgeBase(r, keys).batch_count("classify_content")
            t_set = time.time()
            targets = dict.fromkeys(ex.topology.names, START_REPLICAS)
            targets["classify_content"] = target
            plan = PlanRecord(
                plan_id=f"bench{k}", interval=0, targets=targets, closed_at=t_set, decided_at=t_set
            )
            assert ex.apply(plan).status == "applied"
            effect.append(_wait_effect(r, keys) - t_set)
            batch.append(_wait_batch(r, keys, before, target, t_set) - t_set)
            time.sleep(1.5)
    finally:
        stop.set()
        feeder.join(5)
    return {
        "resize_effect_ms_median": round(1000 * statistics.median(effect), 1),
        "resize_effect_ms_max": round(1000 * max(effect), 1),
        "resize_batch_ms_median": round(1000 * statistics.median(batch), 1),
        "resize_batch_ms_max": round(1000 * max(batch), 1),
    }


RESIZE_WAIT_S = 30.0  # a change not in effect by then is a failure, not a slow figure


def _wait_effect(r: Any, keys: Keys) -> float:
    deadline = time.monotonic() + RESIZE_WAIT_S
    while (at := r.hget(keys.rescale("classify_content"), "effect_at")) is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"no effect recorded within {RESIZE_WAIT_S} s")
        time.sleep(0.005)
    return float(at)


def _wait_batch(r: Any, keys: Keys, before: int, target: int, t_set: float) -> float:
    deadline = time.monotonic() + RESIZE_WAIT_S
    while time.monotonic() < deadline:
        new = KnowledgeBase(r, keys).batches("classify_content", before)
        hit = next((b for b in new if b["active"] == target and b["at"] >= t_set), None)
        if hit:
            return float(hit["at"])
        time.sleep(0.01)
    raise TimeoutError(f"no batch planned with {target} replicas within {RESIZE_WAIT_S} s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=30000)
    ap.add_argument("--cluster", action="store_true", help="local[N] against local-cluster[2,…]")
    args = ap.parse_args()
    if args.cluster:
        return compare_cluster(args.events)
    results = {}
    for fixed in (False, True):  # a fresh broker each: neither run sees the other's events
        with embedded.kafka_broker() as bootstrap, embedded.redis_server() as redis_url:
            results[fixed] = run_once(bootstrap, redis_url, args.events, fixed=fixed)
    elastic, fixed = results[False], results[True]
    print(
        json.dumps(
            {
                "events": args.events,
                "elastic": elastic,
                "hard_coded": fixed,
                "elastic_over_hard_coded": round(
                    elastic["events_per_s"] / fixed["events_per_s"], 3
                ),
            }
        )
    )


def compare_cluster(n: int) -> None:
    results = {}
    for name, env in (("local", {}), ("local_cluster_2x1", CLUSTER)):
        with embedded.kafka_broker() as bootstrap, embedded.redis_server() as redis_url:
            results[name] = run_once(bootstrap, redis_url, n, fixed=False, extra_env=env)
    ratio = results["local_cluster_2x1"]["events_per_s"] / results["local"]["events_per_s"]
    print(json.dumps({"events": n, **results, "cluster_over_local": round(ratio, 3)}))


if __name__ == "__main__":
    main()
