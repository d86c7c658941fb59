"""Nexmark q5 and q7 beside what a Python user would pick instead: the elastic-sps
dataplane (a pool of 2 per operator), quix-streams and Bytewax, on the same generated
events (``sps_nexmark.generate``), one embedded Apache Kafka broker and redis-server, 2
partitions on the input, one invocation, the peers alternating run by run, each run on
fresh topics.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_nexmark.py [--queries q5,q7]
     [--runs 3] [--events 30000] [--seconds 40] [--json]
     (quix-streams and Bytewax run from .venv-peers: `make peers-venv`)

* ``elastic-sps``: the ingress and the PySpark dataplane, 2 replicas per operator
  (``SPS_FIXED_REPLICAS``), the id ledger off (the peers keep none); the query's
  topology from ``examples/nexmark`` on the run's topics. Its keyed operators do not
  chain (``chain`` is off for stateful operators), so a chained run would be this one.
* ``quix-streams``: ``benchmarks/peers/quix_nexmark.py``, a process per input partition,
  grace 5 s (``GRACE_MS``), 30 s in its second stage (``MID_GRACE_MS``);
* ``bytewax``: ``benchmarks/peers/bytewax_nexmark.py``, a process per input partition
  (``bytewax.run -i/-a``), its clock waiting 5 s.

The aggregates are ``sps_nexmark.queries``' classes in all three. Per run, three phases,
each on event times of its own (a phase starts 120 s of event time after the last one's
flush) and each ending with a flush (bids on 32 auctions every 10 s of event time for
400 s, on every partition, which closes every earlier window in every stage):

1. warm-up, unmeasured: ``--warm-seconds`` paced at ``--warm-rate``;
2. saturation: ``--events`` produced at once (event time at ``--event-rate``): events/s
   from the first produce to the last row of a window closed by the flush, and events/s
   a core (events / CPU seconds of every process of the run but the benchmark's own);
3. half load: paced at half that run's saturation rate for ``--seconds``, event time at
   the same pace: each row's latency is the time it was first read from the sink's topic
   minus the produce time of the first event at or past its window's end (the event that
   makes the window closable), p50/p99 over the rows; CPU per event by process role.

Every phase's rows for the windows it closed must equal ``sps_nexmark.reference``'s
(``exact``). Printed: min/median/max per peer and query; ``--json``: the rows.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from confluent_kafka import Consumer, Producer
from sps_nexmark.check import compare
from sps_nexmark.generate import BASE_TIME_MS, Generator
from sps_nexmark.reference import reference

from benchmarks.bench_peers import (
    PEERS_PYTHON,
    ROLES,
    Pipeline,
    _spawn,
    cpu_seconds,
    start_services,
)
from elastic_sps.io import embedded
from elastic_sps.io.kafka_admin import ensure_topics
from elastic_sps.io.kafka_io import take_ready
from elastic_sps.model import topology
from tests.support.processes import free_port

ROOT = Path(__file__).resolve().parents[1]
NEXMARK = ROOT / "examples" / "nexmark"
PEERS_DIR = ROOT / "benchmarks" / "peers"
PARTITIONS = 2
REPLICAS = 2
FLUSH_STEP_MS, FLUSH_STEPS, FLUSH_KEYS = 10_000, 40, 32
PHASE_GAP_MS = 120_000
# the peers' lateness allowance: a peer's window time is the largest event time seen in
# its partition, so events of the other input partition, a little behind, are late for
# it (quix-streams dropped ~1 % of q7's bids with grace 0); elastic-sps's watermark is
# the least of its inputs' (Flink's rule) and needs none
GRACE_MS = 5_000
NEXMARK_ROLES = (("quix_nexmark.py", "quix-streams"), ("bytewax", "bytewax"), *ROLES)


def topology_file(query: str, folder: Path, src: str, dst: str) -> Path:
    """``examples/nexmark/<query>.yaml`` on this run's topics."""
    doc = yaml.safe_load((NEXMARK / f"{query}.yaml").read_text())
    doc["source"]["topics"] = [src]
    doc["source"].pop("sample_events", None)  # every cost is declared
    for op in doc["operators"]:
        op["max_replicas"] = max(REPLICAS, op.get("max_replicas", 1))
        if "output" in op:
            op["output"] = dst
    path = folder / f"{query}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def elastic_sps(
    bootstrap: str,
    redis_url: str,
    tag: str,
    query: str,
    replicas: int = REPLICAS,
    fixed: bool = True,
) -> Pipeline:
    """The query's dataplane and ingress, ``replicas`` per operator (``fixed``: held there;
    else the active counts in Redis decide, as the execute service writes them)."""
    pipe = Pipeline(f"{tag}.in", f"{tag}.out")
    ensure_topics(bootstrap, [pipe.src, pipe.dst], PARTITIONS)
    folder = Path(tempfile.mkdtemp(prefix="sps-nexmark-"))
    topo_file = topology_file(query, folder, pipe.src, pipe.dst)
    env = {
        "SPS_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "SPS_REDIS_URL": redis_url,
        "SPS_KEY_PREFIX": tag,
        "SPS_TOPOLOGY": str(topo_file),
        "SPS_CHECKPOINT_DIR": str(folder / "ckpt"),
        "SPS_TRACK_IDS": "false",
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(NEXMARK)]),
    }
    pipe.operators = topology.load(topo_file).names
    pipe.procs += start_services(redis_url, tag, env, pipe.operators, replicas, fixed)
    return pipe


def _peers_python() -> str:
    if not PEERS_PYTHON.exists():
        raise SystemExit(f"{PEERS_PYTHON} is missing: make peers-venv")
    return str(PEERS_PYTHON)


def quix_streams(
    bootstrap: str, _: str, tag: str, query: str, processes: int = PARTITIONS
) -> Pipeline:
    pipe = Pipeline(f"{tag}.in", f"{tag}.out")
    ensure_topics(bootstrap, [pipe.src, pipe.dst], PARTITIONS)
    for _k in range(processes):
        argv = [_peers_python(), str(PEERS_DIR / "quix_nexmark.py"), "--query", query]
        argv += ["--bootstrap", bootstrap, "--group", tag, "--src", pipe.src, "--dst", pipe.dst]
        argv += ["--grace-ms", str(GRACE_MS)]
        pipe.procs.append(_spawn(argv, {"PYTHONPATH": str(NEXMARK)}))
    return pipe


def bytewax(bootstrap: str, _: str, tag: str, query: str) -> Pipeline:
    pipe = Pipeline(f"{tag}.in", f"{tag}.out")
    ensure_topics(bootstrap, [pipe.src, pipe.dst], PARTITIONS)
    addresses = ";".join(f"127.0.0.1:{free_port()}" for _ in range(PARTITIONS))
    env = {"NEXMARK_QUERY": query, "NEXMARK_BOOTSTRAP": bootstrap, "NEXMARK_SRC": pipe.src,
           "NEXMARK_DST": pipe.dst, "NEXMARK_GROUP": tag, "NEXMARK_GRACE_MS": str(GRACE_MS),
           "PYTHONPATH": os.pathsep.join([str(PEERS_DIR), str(NEXMARK)])}  # fmt: skip
    for k in range(PARTITIONS):
        argv = [_peers_python(), "-m", "bytewax.run", "bytewax_nexmark:flow"]
        pipe.procs.append(_spawn([*argv, "-i", str(k), "-a", addresses], env))
    return pipe


PEERS = {"elastic-sps": elastic_sps, "quix-streams": quix_streams, "bytewax": bytewax}


def result_row(value: dict[str, Any]) -> dict[str, Any]:
    """elastic-sps's sink writes ``{"id", "value"}``; the peers write the row itself."""
    return value["value"] if set(value) == {"id", "value"} else value


class Collector(threading.Thread):
    """Reads the sink's topic from the start: every row, with when it was first read."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.rows: list[tuple[float, dict[str, Any]]] = []
        self.halt = threading.Event()
        conf = {"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                "auto.offset.reset": "earliest", "enable.auto.commit": False}  # fmt: skip
        self.consumer = Consumer(conf)
        self.consumer.subscribe([topic])

    def run(self) -> None:
        while not self.halt.is_set():
            for m in take_ready(self.consumer, 1000, 0.05):
                if not m.error():
                    self.rows.append((time.time(), result_row(json.loads(m.value()))))
        self.consumer.close()

    def wait_for(self, windows: Counter[int], pipe: Pipeline, timeout: float) -> float:
        """Wait until every window (by start) has a row (a window's rows go out at once;
        whether they are right is ``Phase.judged``'s); the time the last was read."""
        if not windows:
            raise SystemExit("a phase closes no window: give it more --events or --seconds")
        deadline = time.monotonic() + timeout
        while True:
            rows = list(self.rows)
            got = Counter(r["window_start"] for _, r in rows if r["window_start"] in windows)
            if all(got[w] for w in windows):
                return max(t for t, r in rows if r["window_start"] in windows)
            if time.monotonic() > deadline or not pipe.alive():
                missing = sum(1 for w in windows if not got[w])
                raise RuntimeError(f"{missing} of {len(windows)} windows missing")
            time.sleep(0.05)


class Phase:
    """One phase's events (event time from ``base_ms`` at ``rate`` events/s), what the
    reference expects of the windows they close, and their produce times once fed."""

    def __init__(self, query: str, n: int, rate: float, base_ms: int, seed: int) -> None:
        self.query = query
        self.events = list(Generator(rate, seed=seed, base_ms=base_ms).events(n))
        self.last_ms = max(_time_ms(e) for e in self.events)
        self.expected = [
            r for r in reference(query, self.events) if r["window_end"] <= self.last_ms
        ]
        self.windows = Counter(r["window_start"] for r in self.expected)
        self.sent: list[tuple[int, float]] = []  # (event time, produce time), in event time

    def flush_events(self) -> list[dict[str, Any]]:
        """Bids past the last event, on every partition, on 32 auctions and over 40
        windows: every earlier window closes in every stage. (A keyed partition's time
        moves with the events routed to it, in elastic-sps as in quix-streams' repartition
        topics, so the flush must reach every key group of both stages.)"""
        return [{"bid": {"auction": a, "bidder": 1, "price": 1, "extra": "",
                         "dateTime": self.last_ms + FLUSH_STEP_MS * j}}
                for j in range(1, FLUSH_STEPS + 1) for _ in range(PARTITIONS)
                for a in range(1, FLUSH_KEYS + 1)]  # fmt: skip

    def next_base(self) -> int:
        return self.last_ms + FLUSH_STEP_MS * FLUSH_STEPS + PHASE_GAP_MS

    def feed(self, producer: Producer, topic: str, rate: float | None) -> None:
        """Produce the events (at ``rate`` a second, or at once), then the flush."""
        t0 = time.monotonic()
        for k, e in enumerate(self.events):
            if rate:
                ahead = t0 + k / rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
            self.sent.append((_time_ms(e), time.time()))
            producer.produce(topic, json.dumps(e).encode(), partition=k % PARTITIONS)
            producer.poll(0)
        for k, e in enumerate(self.flush_events()):
            producer.produce(topic, json.dumps(e).encode(), partition=k % PARTITIONS)
        producer.flush()
        self.sent.sort()

    def closing_time(self, window_end: int) -> float:
        """When the first event at or past ``window_end`` was produced."""
        k = bisect.bisect_left(self.sent, (window_end, 0.0))
        return self.sent[k][1] if k < len(self.sent) else self.sent[-1][1]

    def judged(self, rows: list[tuple[float, dict[str, Any]]]) -> tuple[bool, list[float]]:
        """Whether this phase's rows equal the reference's, and each row's latency (ms)."""
        mine = [(t, r) for t, r in rows if r["window_start"] in self.windows]
        first: dict[str, tuple[float, dict]] = {}
        for t, r in mine:
            first.setdefault(json.dumps(r, sort_keys=True), (t, r))
        verdict = compare(self.query, [r for _, r in first.values()], self.events)
        lat = [1000 * (t - self.closing_time(r["window_end"])) for t, r in first.values()]
        return bool(verdict["exact"]), lat


def _time_ms(e: dict[str, Any]) -> int:
    return int(next(iter(e.values()))["dateTime"])


def measure(
    peer: str, query: str, bootstrap: str, redis_url: str, args: argparse.Namespace
) -> dict[str, Any]:
    tag = f"nx{uuid.uuid4().hex[:6]}"
    pipe = PEERS[peer](bootstrap, redis_url, tag, query)
    collector = Collector(bootstrap, pipe.dst)
    collector.start()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    try:
        warm = Phase(
            query, int(args.warm_rate * args.warm_seconds), args.warm_rate, BASE_TIME_MS, 1
        )
        warm.feed(producer, pipe.src, args.warm_rate)
        if warm.windows:
            collector.wait_for(warm.windows, pipe, args.timeout)
        burst = Phase(query, args.events, args.event_rate, warm.next_base(), 2)
        cpu0, t0 = cpu_seconds(NEXMARK_ROLES), time.time()
        burst.feed(producer, pipe.src, None)
        last = collector.wait_for(burst.windows, pipe, args.timeout)
        used = {k: v - cpu0.get(k, 0.0) for k, v in cpu_seconds(NEXMARK_ROLES).items()}
        eps = args.events / (last - t0)
        engine_cpu = sum(v for k, v in used.items() if k != "bench")
        rate = eps / 2
        paced = Phase(query, int(rate * args.seconds), rate, burst.next_base(), 3)
        cpu0 = cpu_seconds(NEXMARK_ROLES)
        paced.feed(producer, pipe.src, rate)
        collector.wait_for(paced.windows, pipe, args.timeout)
        used = {k: v - cpu0.get(k, 0.0) for k, v in cpu_seconds(NEXMARK_ROLES).items()}
        rows = list(collector.rows)
        verdicts = [p.judged(rows) for p in (warm, burst, paced) if p.windows]
        exact = [ok for ok, _ in verdicts]
        lat = np.array(verdicts[-1][1])  # the paced phase's, which always has windows
        n = len(paced.events)
        return {
            "peer": peer, "query": query,
            "events_per_s": round(eps),
            "events_per_core_s": round(args.events / engine_cpu) if engine_cpu else None,
            "p50_ms": round(float(np.percentile(lat, 50)), 1),
            "p99_ms": round(float(np.percentile(lat, 99)), 1),
            "latency_rows": len(lat),
            "at_events_per_s": round(rate),
            "cpu_ms_per_event": round(1000 * sum(used.values()) / n, 4),
            "cpu_ms_per_event_by_role": {k: round(1000 * v / n, 4)
                                         for k, v in sorted(used.items())},
            "exact": all(exact),
        }  # fmt: skip
    finally:
        collector.halt.set()
        collector.join(10)
        pipe.stop()


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for peer, query in dict.fromkeys((r["peer"], r["query"]) for r in rows):
        mine = [r for r in rows if (r["peer"], r["query"]) == (peer, query) and "error" not in r]
        if not mine:
            continue
        row: dict[str, Any] = {"peer": peer, "query": query, "runs": len(mine),
                               "exact": all(r["exact"] for r in mine)}  # fmt: skip
        for key in ("events_per_s", "events_per_core_s", "p50_ms", "p99_ms", "cpu_ms_per_event"):
            vals = [r[key] for r in mine if r[key] is not None]
            row[key] = {"min": min(vals), "median": statistics.median(vals), "max": max(vals)}
        out.append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", default="q5,q7")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--events", type=int, default=30_000, help="the saturation phase's")
    ap.add_argument("--event-rate", type=float, default=1000.0,
                    help="events per second of event time in the saturation phase")  # fmt: skip
    ap.add_argument("--seconds", type=float, default=40.0, help="the half-load phase")
    ap.add_argument("--warm-seconds", type=float, default=20.0, help="unmeasured paced run first")
    ap.add_argument("--warm-rate", type=float, default=1000.0, help="its events/s")
    ap.add_argument("--timeout", type=float, default=300.0, help="a phase's wait for its windows")
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    queries = [q.strip() for q in args.queries.split(",") if q.strip()]
    rows = []
    with embedded.kafka_broker() as bootstrap, embedded.redis_server() as redis_url:
        for run in range(args.runs):
            for query in queries:
                for peer in peers if run % 2 == 0 else reversed(peers):  # alternating
                    try:
                        row = {**measure(peer, query, bootstrap, redis_url, args), "run": run}
                    except RuntimeError as exc:  # a peer that failed a run: said, not hidden
                        row = {"peer": peer, "query": query, "run": run, "error": str(exc)}
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr if args.json else sys.stdout, flush=True)
    if args.json:
        print(json.dumps({"rows": rows, "summary": summary(rows)}))
        return
    for s in summary(rows):
        cells = [f"{k} {v['min']}/{v['median']}/{v['max']}" for k, v in s.items()
                 if isinstance(v, dict)]  # fmt: skip
        print(f"{s['peer']:<13} {s['query']} exact={s['exact']} " + "  ".join(cells))


if __name__ == "__main__":
    main()
