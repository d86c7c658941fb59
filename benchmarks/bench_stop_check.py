"""What a task's stop check costs at rest: the client CPU of one Redis ``MGET`` of the
keys a task with no keyed count asks (its dataplane's stop key), every 0.1 s (each read,
as before) and every ``STOP_ONLY_CHECK_S``, against sleeping alone, on an embedded
redis-server. Machine-dependent: a benchmark, not a test.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_stop_check.py [--seconds 30] [--json]
"""

from __future__ import annotations

import argparse
import json
import time

import redis

from elastic_sps.io.embedded import redis_server
from elastic_sps.services.dataplane.reading import STOP_CHECK_S
from elastic_sps.services.dataplane.replica import STOP_ONLY_CHECK_S


def cores(r: redis.Redis, every_s: float | None, seconds: float) -> float:
    """This process's CPU per second while it wakes every ``STOP_CHECK_S`` (as a reader
    does) and asks Redis every ``every_s`` (None: never)."""
    c0, t0, asked = time.process_time(), time.monotonic(), -1e9
    while time.monotonic() - t0 < seconds:
        now = time.monotonic()
        if every_s is not None and now - asked >= every_s:
            r.mget(["bench:active:op", "bench:dp:stopping:host"])
            asked = now
        time.sleep(STOP_CHECK_S)
    return (time.process_time() - c0) / seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with redis_server() as url:
        r = redis.Redis.from_url(url)
        out = {
            "sleep_only_cores": cores(r, None, args.seconds),
            "every_read_cores": cores(r, STOP_CHECK_S, args.seconds),
            "stop_only_cores": cores(r, STOP_ONLY_CHECK_S, args.seconds),
        }
    out = {k: round(v, 5) for k, v in out.items()}
    print(json.dumps(out) if args.json else "\n".join(f"{k}: {v}" for k, v in out.items()))


if __name__ == "__main__":
    main()
