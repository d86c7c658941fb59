"""The price of a resize on Nexmark q5, beside quix-streams': elastic-sps scaling the
window operator (``counts``) 1 -> 2 -> 1 live, against quix-streams scaling the same
query out from one process to two and back (a consumer-group rebalance, the state
restored from its changelog topic), measured the same way for both.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_nexmark_resize.py [--rate 800]
     [--seconds 90] [--runs 1] [--json]   (quix-streams from .venv-peers)

One embedded broker and redis-server; per run, q5 paced at ``--rate`` events/s with its
event time at the same pace (``bench_nexmark.Phase``), the change at a third of the run
and the change back at two thirds. elastic-sps's change is what the execute service
writes (the operator's active count in Redis; the dataplane applies it at a micro-batch
boundary, moving the partitions' state); quix-streams' is starting and stopping its
second process. Per change: the longest gap between two windows' first rows read in the
20 s after it (the steady gap is the 2 s slide), and the highest row latency in those
20 s (``bench_nexmark``'s latency: read time minus the produce time of the event that
made the window closable) beside the median before the first change. ``exact``: every
closed window's rows equal the reference's.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import threading
import time
from typing import Any

import redis

from benchmarks.bench_nexmark import BASE_TIME_MS, Phase, elastic_sps, quix_streams
from benchmarks.harness.engines import Pipeline
from benchmarks.harness.runs import fresh_tag, running
from elastic_sps.io import embedded
from elastic_sps.io.knowledge_base import Keys

AFTER_S = 20.0  # how long after a change its gap and spike are looked for


def _sps_change(redis_url: str, tag: str) -> Any:
    r = redis.Redis.from_url(redis_url)
    return lambda n: r.set(Keys(tag).active("counts"), n)


def _quix_change(pipe: Pipeline, bootstrap: str, tag: str) -> Any:
    spare = Pipeline(pipe.src, pipe.dst)  # the second process, while it runs

    def change(n: int) -> None:
        if n == 2:
            spare.procs = quix_streams(bootstrap, "", tag, "q5", processes=1).procs
        else:
            spare.stop()
            spare.procs = []

    return change


def around(changes: list[float], phase: Phase, rows: list[tuple[float, dict]]) -> dict[str, Any]:
    """Each change's longest gap between windows' first rows and highest row latency in
    the ``AFTER_S`` after it; the median latency before the first change."""
    first: dict[int, float] = {}
    for t, r in rows:
        first[r["window_start"]] = min(t, first.get(r["window_start"], t))
    arrivals = sorted(first.values())
    lat = [(t, 1000 * (t - phase.closing_time(r["window_end"]))) for t, r in rows]
    before = [ms for t, ms in lat if t < changes[0]]
    steady = round(statistics.median(before), 1) if before else None
    out: dict[str, Any] = {"steady_latency_ms": steady}
    for k, at in enumerate(changes):
        near = [t for t in arrivals if at - 5 <= t <= at + AFTER_S]
        gaps = [b - a for a, b in itertools.pairwise(near)]
        out[f"change{k + 1}_gap_s"] = round(max(gaps), 2) if gaps else None
        spike = [ms for t, ms in lat if at <= t <= at + AFTER_S]
        out[f"change{k + 1}_max_latency_ms"] = round(max(spike), 1) if spike else None
    return out


def measure(peer: str, bootstrap: str, redis_url: str, args: argparse.Namespace) -> dict:
    tag = fresh_tag("nr")
    if peer == "elastic-sps":
        pipe = elastic_sps(bootstrap, redis_url, tag, "q5", replicas=1, fixed=False)
        change = _sps_change(redis_url, tag)
    else:
        pipe = quix_streams(bootstrap, redis_url, tag, "q5", processes=1)
        change = _quix_change(pipe, bootstrap, tag)
    try:
        with running(pipe, bootstrap) as (collector, producer):
            warm = Phase("q5", int(args.rate * 20), args.rate, BASE_TIME_MS, 1)
            warm.feed(producer, pipe.src, args.rate)
            collector.wait_for_windows(warm.windows, pipe, 600)
            phase = Phase("q5", int(args.rate * args.seconds), args.rate, warm.next_base(), 2)
            feeder = threading.Thread(target=phase.feed, args=(producer, pipe.src, args.rate))
            t0 = time.time()
            feeder.start()
            changes = []
            for at, n in ((args.seconds / 3, 2), (2 * args.seconds / 3, 1)):
                time.sleep(max(0.0, t0 + at - time.time()))
                changes.append(time.time())
                change(n)
            feeder.join()
            collector.wait_for_windows(phase.windows, pipe, 600)
            rows = [(t, r) for t, r in collector.rows if r["window_start"] in phase.windows]
    finally:
        change(1)
    exact, _ = phase.judged(rows)
    return {"peer": peer, "rate": args.rate, **around(changes, phase, rows), "exact": exact}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=800.0, help="events/s (half load or less)")
    ap.add_argument("--seconds", type=float, default=90.0)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    with embedded.kafka_broker() as bootstrap, embedded.redis_server() as redis_url:
        for run in range(args.runs):
            for peer in ("elastic-sps", "quix-streams")[:: 1 if run % 2 == 0 else -1]:
                rows.append({**measure(peer, bootstrap, redis_url, args), "run": run})
                if not args.json:
                    print(json.dumps(rows[-1]), flush=True)
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
