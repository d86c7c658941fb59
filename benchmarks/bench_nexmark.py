"""Nexmark q5 and q7 beside what a Python user would pick instead: the elastic-sps
dataplane (a pool of 2 per operator), quix-streams and Bytewax, on the same generated
events (``sps_nexmark.generate``), one embedded Apache Kafka broker and redis-server, 2
partitions on the input, one invocation, the peers alternating run by run, each run on
fresh topics.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_nexmark.py [--queries q5,q7]
     [--runs 3] [--events 30000] [--seconds 40] [--json]
     (quix-streams and Bytewax run from .venv-peers: `make peers-venv`)

* ``elastic-sps``: the ingress service (``SPS_ADMISSION=ingress``) and the PySpark
  dataplane, 2 replicas per operator (``SPS_FIXED_REPLICAS``), the id ledger off (the
  peers keep none); the query's topology from ``examples/nexmark`` on the run's topics,
  chained as loaded (each window heads a chain of the row steps after it: q5 runs
  ``bids``, ``counts``, ``hottest..q5``; q7 ``bids``, ``per_auction..partial``,
  ``highest..q7``; a keyed stage after a stateless one is its own hop);
  ``elastic-sps-entry``: the same with admission as the first step
  (``SPS_ADMISSION=entry``, what ``auto``, the default, picks here: no ingress, the
  input read once by ``bids``).
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
   a core (events / CPU seconds of every process of the run but the benchmark's own),
   and those CPU seconds by role (``saturation_cpu_ms_per_event_by_role``);
3. half load: paced at half that run's saturation rate for ``--seconds``, event time at
   the same pace: each row's latency is the time it was first read from the sink's topic
   minus the produce time of the first event at or past its window's end (the event that
   makes the window closable), p50/p99 over the rows; CPU per event by process role;
4. at rest: ``--idle-seconds`` with no input, the cores the running engine spends
   (``idle_cores``, by role): the saturation figure counts them while windows close.

Every phase's rows for the windows it closed must equal ``sps_nexmark.reference``'s
(``exact``). Beside the runs a probe per core times a fixed piece of Python work
(``harness.machine``): ``probe_ms``, its median over the saturation phase, and
``events_per_core_s_at_fastest``, the figure rescaled to the invocation's fastest
reading (this machine kind's cores change speed on their own). Printed: min/median/max
per peer and query; ``--json``: the rows.
"""

from __future__ import annotations

import argparse
import bisect
import json
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import Producer
from sps_nexmark.check import compare
from sps_nexmark.generate import BASE_TIME_MS, Generator
from sps_nexmark.reference import reference

from benchmarks.harness import engines
from benchmarks.harness.broker import add_warm_flag, ready_broker
from benchmarks.harness.engines import PARTITIONS, REPLICAS, ROOT, Pipeline
from benchmarks.harness.machine import SpeedProbe, at_fastest
from benchmarks.harness.processes import cpu_at_rest, cpu_seconds, cpu_since
from benchmarks.harness.runs import fresh_tag, names, paced, report, run_all, running
from benchmarks.harness.summary import cpu_cells, idle_cells, latency_cells, summary
from elastic_sps.io import embedded

NEXMARK = ROOT / "examples" / "nexmark"
FLUSH_STEP_MS, FLUSH_STEPS, FLUSH_KEYS = 10_000, 40, 32
PHASE_GAP_MS = 120_000
# the peers' lateness allowance: a peer's window time is the largest event time seen in
# its partition, so events of the other input partition, a little behind, are late for
# it (quix-streams dropped ~1 % of q7's bids with grace 0); elastic-sps's watermark is
# the least of its inputs' (Flink's rule) and needs none
GRACE_MS = 5_000
METRICS = ("events_per_s", "events_per_core_s", "events_per_core_s_at_fastest", "probe_ms",
           "p50_ms", "p99_ms", "cpu_ms_per_event")  # fmt: skip


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
    env: dict[str, str] | None = None,
) -> Pipeline:
    """The query's dataplane and ingress, ``replicas`` per operator (``fixed``: held there;
    else the active counts in Redis decide, as the execute service writes them); ``env``
    over the services' settings."""
    write = partial(topology_file, query)
    return engines.elastic_sps(bootstrap, redis_url, tag, write, [NEXMARK], env, replicas, fixed)


def quix_streams(
    bootstrap: str, _: str, tag: str, query: str, processes: int = PARTITIONS
) -> Pipeline:
    argv = ["--query", query, "--grace-ms", str(GRACE_MS)]
    return engines.quix_streams(bootstrap, tag, "quix_nexmark.py", argv, [NEXMARK], processes)


def bytewax(bootstrap: str, _: str, tag: str, query: str) -> Pipeline:
    env = {"NEXMARK_QUERY": query, "NEXMARK_GRACE_MS": str(GRACE_MS)}
    return engines.bytewax(bootstrap, tag, "bytewax_nexmark:flow", env, [NEXMARK])


PEERS: dict[str, Callable[..., Pipeline]] = {
    "elastic-sps": partial(elastic_sps, env={"SPS_ADMISSION": "ingress"}),
    "elastic-sps-entry": partial(elastic_sps, env={"SPS_ADMISSION": "entry"}),
    "quix-streams": quix_streams,
    "bytewax": bytewax,
}


class Phase:
    """One phase's events (event time from ``base_ms`` at ``rate`` events/s), what the
    reference expects of the windows they fall in, and their produce times once fed."""

    def __init__(self, query: str, n: int, rate: float, base_ms: int, seed: int) -> None:
        self.query = query
        self.events = list(Generator(rate, seed=seed, base_ms=base_ms).events(n))
        self.last_ms = max(_time_ms(e) for e in self.events)
        # every window the events fall in, so that waiting for them waits for every event:
        # the flush's first bids, FLUSH_STEP_MS after the last event, close the last one
        # and fall in none of them
        horizon = self.last_ms + FLUSH_STEP_MS
        self.expected = [r for r in reference(query, self.events) if r["window_end"] <= horizon]
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
        for k, e in paced(self.events, rate):
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

    def judged(
        self, rows: list[tuple[float, dict[str, Any]]]
    ) -> tuple[dict[str, Any], list[float]]:
        """How this phase's rows compare with the reference's (``compare``; not exact:
        with every row of its first wrong window, repeats too, and the reference's), and
        each row's latency (ms)."""
        mine = [(t, r) for t, r in rows if r["window_start"] in self.windows]
        first: dict[str, tuple[float, dict]] = {}
        for t, r in mine:
            first.setdefault(json.dumps(r, sort_keys=True), (t, r))
        verdict = compare(self.query, [r for _, r in first.values()], self.events)
        if not verdict["exact"]:
            wrong = verdict.get("first_wrong", [])[:1]
            verdict["wrong_rows"] = [r for _, r in mine if r["window_start"] in wrong]
            verdict["wanted_rows"] = [r for r in self.expected if r["window_start"] in wrong]
        lat = [1000 * (t - self.closing_time(r["window_end"])) for t, r in first.values()]
        return verdict, lat


def _inexact(verdicts: list[tuple[dict[str, Any], list[float]]]) -> dict[str, Any]:
    """The phases (0: the warm-up, 1: the burst, 2: the half load) whose rows were not
    exact, with how (a failed run said, not hidden)."""
    wrong = [{"phase": k, **v} for k, (v, _) in enumerate(verdicts) if not v["exact"]]
    return {"inexact": wrong} if wrong else {}


def _time_ms(e: dict[str, Any]) -> int:
    return int(next(iter(e.values()))["dateTime"])


def measure(
    peer: str, query: str, bootstrap: str, redis_url: str, args: argparse.Namespace
) -> dict[str, Any]:
    pipe = PEERS[peer](bootstrap, redis_url, fresh_tag("nx"), query)
    with running(pipe, bootstrap) as (collector, producer):
        warm = Phase(
            query, int(args.warm_rate * args.warm_seconds), args.warm_rate, BASE_TIME_MS, 1
        )
        warm.feed(producer, pipe.src, args.warm_rate)
        if warm.windows:
            collector.wait_for_windows(warm.windows, pipe, args.timeout)
        burst = Phase(query, args.events, args.event_rate, warm.next_base(), 2)
        cpu0, t0 = cpu_seconds(), time.time()
        burst.feed(producer, pipe.src, None)
        last = collector.wait_for_windows(burst.windows, pipe, args.timeout)
        burst_wall = (t0, time.time())
        burst_cpu = {k: v for k, v in cpu_since(cpu0).items() if k != "bench"}
        engine_cpu = sum(burst_cpu.values())
        eps = args.events / (last - t0)
        rate = eps / 2
        half = Phase(query, int(rate * args.seconds), rate, burst.next_base(), 3)
        cpu0 = cpu_seconds()
        half.feed(producer, pipe.src, rate)
        collector.wait_for_windows(half.windows, pipe, args.timeout)
        used = cpu_since(cpu0)
        rows = list(collector.rows)
        verdicts = [p.judged(rows) for p in (warm, burst, half) if p.windows]
        return {
            "peer": peer, "query": query,
            "events_per_s": round(eps),
            "events_per_core_s": round(args.events / engine_cpu) if engine_cpu else None,
            "saturation_cpu_ms_per_event_by_role": cpu_cells(burst_cpu, args.events)[
                "cpu_ms_per_event_by_role"],
            # the half-load phase's rows, which always has windows
            **latency_cells(verdicts[-1][1]),
            "latency_rows": len(verdicts[-1][1]),
            "at_events_per_s": round(rate),
            **cpu_cells(used, len(half.events)),
            **idle_cells(cpu_at_rest(args.idle_seconds), args.idle_seconds),
            "exact": all(v["exact"] for v, _ in verdicts),
            **_inexact(verdicts),
            "phase": burst_wall,
        }  # fmt: skip


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
    ap.add_argument(
        "--idle-seconds",
        type=float,
        default=10.0,
        help="after the half-load phase, this long with no input: idle_cores",
    )
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--json", action="store_true")
    add_warm_flag(ap)
    args = ap.parse_args()
    cases = [{"query": q} for q in names(args.queries)]
    with embedded.kafka_broker() as bootstrap, embedded.redis_server() as redis_url:
        broker = ready_broker(bootstrap, args.broker_warm_s)

        def one(peer: str, case: dict[str, str]) -> dict[str, Any]:
            return measure(peer, case["query"], bootstrap, redis_url, args)

        with SpeedProbe() as probe:
            rows = run_all(
                one, names(args.peers), cases, args.runs, args.json, broker, args.warm_runs, probe
            )
    at_fastest(rows, "events_per_core_s", "events_per_core_s_at_fastest")
    report(rows, summary(rows, ("peer", "query"), METRICS, all_of=("exact",)), args.json)


if __name__ == "__main__":
    main()
