"""Where the chained pipeline's end-to-end latency goes: the ingress hop (produce to the
user's topic → the envelope on the chain's topic) and the replica hop (→ the output).

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_hops.py [--rate 4000] [--runs 3]

The same pipeline, broker and feed as ``bench_peers.py``'s ``elastic-sps-chained``; a
second collector reads the chain's topic, so the machine carries one more consumer than
in ``bench_peers.py`` (its figures are a split, not a replacement). Per run: p50/p90/p99
of each hop and end to end, with the input paced at ``--rate`` for ``--seconds``, after
``--warm-seconds`` at that rate unmeasured (``bench_peers.warm``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import time

import numpy as np
import redis

from benchmarks import bench_peers as peers
from benchmarks.harness.collector import Collector
from benchmarks.harness.processes import cpu_seconds
from benchmarks.harness.runs import fresh_tag, running
from elastic_sps.io import embedded
from elastic_sps.io.knowledge_base import Keys, KnowledgeBase

CHAIN_TAG = "hops"


def percentiles(ms: np.ndarray) -> dict[str, float]:
    return {f"p{q}_ms": round(float(np.percentile(ms, q)), 1) for q in (50, 90, 99)}


def batch_cadence(redis_url: str, tag: str, chain: str, since: float) -> dict[str, float]:
    """From the dataplane's batch log (``source.py``: each batch's planning time and how
    long its tasks are to serve) and task log (``replica.TaskSpan``: when each task served),
    medians over the batches: the period between two plannings, the planned serving time,
    then where a period goes: from planning to the first task's start (``launch_s``: Spark
    plans the batch and starts its Python tasks), the tasks serving (``serving_s``: the
    window, longer when the planned backlog takes longer), and from the last task's end to
    the next planning (``after_s``: Spark ends the batch, commits, triggers the next).
    During ``launch_s`` and ``after_s`` no task reads: what arrives then waits."""
    r = redis.Redis.from_url(redis_url)
    kb = KnowledgeBase(r, tag)
    plans = [p for p in kb.batches(chain) if p["at"] >= since]
    spans = sorted(kb.tasks(chain))
    if len(plans) < 2:
        return {}
    ats = [p["at"] for p in plans]
    launch, serving, after = [], [], []
    for at, nxt in itertools.pairwise(ats):
        mine = [(s, e) for s, e, _ in spans if at <= s < nxt]
        if mine:
            launch.append(min(s for s, _ in mine) - at)
            serving.append(max(e for _, e in mine) - min(s for s, _ in mine))
            after.append(nxt - max(e for _, e in mine))

    def median(xs: list[float]) -> float:
        return round(float(np.median(xs)), 3) if xs else float("nan")

    return {
        "batches": len(plans),
        "batch_period_s": median(list(np.diff(ats))),
        "serve_s": median([p["serve_s"] for p in plans]),
        "launch_s": median(launch),
        "serving_s": median(serving),
        "after_s": median(after),
    }


def one_run(
    bootstrap: str, redis_url: str, rate: float, seconds: float, warm_s: float
) -> dict[str, object]:
    tag = fresh_tag(CHAIN_TAG)
    # the ingress in front, as ``elastic-sps-chained``: the hop it measures is its own
    env = {"SPS_TRACK_IDS": "false", "SPS_ADMISSION": "ingress"}
    pipe = peers.elastic_sps(bootstrap, redis_url, tag, env, chain=True)
    (chain,) = pipe.operators
    with (
        running(pipe, bootstrap) as (out, producer),
        Collector(bootstrap, Keys(tag).topic(chain)) as mid,  # envelopes carry "id" too
    ):
        peers.send_all(producer, pipe, out, 0, 500)  # workers up, groups joined
        peers.warm(producer, pipe, out, rate, warm_s)  # the JVMs' hot paths compiled
        events = list(peers.tweets(20_000_000, int(rate * seconds)))
        cpu0, t0 = cpu_seconds(), time.monotonic()
        sent = peers.feed(producer, pipe.src, events, rate)
        out.wait_for(list(sent), pipe, 600)
        cpu1, wall = cpu_seconds(), time.monotonic() - t0
        ids = [i for i in sent if i in mid.seen]
        return {
            "rate": rate,
            **batch_cadence(redis_url, tag, chain, since=min(sent.values())),
            "ingress_hop": percentiles(np.array([mid.seen[i] - sent[i] for i in ids]) * 1000),
            "replica_hop": percentiles(np.array([out.seen[i] - mid.seen[i] for i in ids]) * 1000),
            "end_to_end": percentiles(np.array([out.seen[i] - sent[i] for i in sent]) * 1000),
            # cores each role kept busy from the first paced event to the last output
            "cores": {k: round((v - cpu0.get(k, 0.0)) / wall, 2) for k, v in cpu1.items()},
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=4000.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument(
        "--warm-seconds", type=float, default=30.0, help="unmeasured, at --rate (0: none)"
    )
    args = ap.parse_args()
    with embedded.kafka_broker() as bootstrap, embedded.redis_server() as redis_url:
        for run in range(args.runs):
            measured = one_run(bootstrap, redis_url, args.rate, args.seconds, args.warm_seconds)
            row = {"run": run, **measured}
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
