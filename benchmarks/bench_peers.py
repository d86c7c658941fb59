"""The same pipeline beside what a user would pick instead: the elastic-sps dataplane at a
fixed replica count, quix-streams, and a plain confluent-kafka loop per operator.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_peers.py [--runs 3] [--events 20000]
     [--json]   (quix-streams runs from .venv-peers: `make peers-venv`)

The pipeline: the Twitter application's four operator functions (``examples/twitter``,
parse → classify_content → classify_author → store, the sink's counts in Redis), the
same generated tweets, one embedded Apache Kafka broker and redis-server for all, 2
partitions on the input and between operators, one invocation, the peers alternating run
by run, each run on fresh topics:

* ``elastic-sps``: the ingress service (``SPS_ADMISSION=ingress``) and the PySpark
  dataplane, 2 replicas per operator
  (``SPS_FIXED_REPLICAS``), with the id ledger off (``elastic-sps``) and on
  (``elastic-sps+ids``: 8 Redis set-adds per event on this chain, what `demo` runs with),
  and with the four operators chained into one pool of 2 (``elastic-sps-chained``:
  ``chain: true`` in the topology, one Kafka hop instead of four), and chained with
  admission as the chain's first step (``elastic-sps-entry``: ``SPS_ADMISSION=entry``, no
  ingress, the input topic read once by the chain's replicas);
* ``quix-streams``: one Application chaining the four functions (its natural form),
  one process per input partition (``benchmarks/peers/quix_app.py``);
* ``plain-kafka``: one process per operator, consume up to 500, apply, produce, commit
  after delivery (``benchmarks/peers/plain_loop.py``).

Per run, after an unmeasured warm-up (``--warm-seconds`` at ``--warm-rate``, the same for
every peer: each run starts its own services, and their JVMs compile as they go):
events/s end to end at saturation (``--events`` produced at once, from the first
produce to the last output seen on the sink's topic), then p50/p99 end-to-end latency
(sink's topic read − produce time, per event) with the input paced at 50 % of that run's
saturation rate for ``--seconds`` (``--rate R``: every peer at R events/s instead, to
compare latencies at one load), and the CPU every process of the run spent per paced
event (``cpu_ms_per_event``; the broker and redis-server included, since a peer that
makes more hops makes the broker work more; by role in the rows), then what it spends in
``--idle-seconds`` with no input (``idle_cores``, by role in the rows). ``probe_ms``: the
machine's speed probe over the half-load phase (``harness.machine``), and
``cpu_ms_per_event_at_fastest`` the CPU figure rescaled to the fastest reading. Printed:
min/median/max per peer; ``--json``: the rows.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from sps_twitter import operators as twitter

from benchmarks.harness import engines
from benchmarks.harness.broker import add_warm_flag, ready_broker
from benchmarks.harness.collector import Collector
from benchmarks.harness.engines import PARTITIONS, REPLICAS, ROOT, Pipeline
from benchmarks.harness.machine import SpeedProbe, at_fastest
from benchmarks.harness.processes import cpu_at_rest, cpu_seconds, cpu_since
from benchmarks.harness.runs import fresh_tag, names, paced, report, run_all, running
from benchmarks.harness.summary import cpu_cells, idle_cells, latency_cells, summary
from elastic_sps.io import embedded

EXAMPLE = ROOT / "examples" / "twitter"
OPS = ("parse", "classify_content", "classify_author", "store")
METRICS = ("events_per_s", "p50_ms", "p99_ms", "cpu_ms_per_event", "cpu_ms_per_event_at_fastest",
           "probe_ms")  # fmt: skip


def topology_file(folder: Path, src: str, dst: str, chain: bool) -> Path:
    """The example's topology on this run's topics, the tweet's id as the event id;
    ``chain``: its four operators chained into one (``elastic_sps.model.topology.chained``)."""
    path = folder / "peers.yaml"
    ops = "\n".join(
        f"  - {{name: {op}, code: 'sps_twitter.operators:{op}', max_replicas: {REPLICAS}"
        + (f", output: {dst}}}" if op == "store" else "}")
        for op in OPS
    )
    edges = "\n".join(
        f"  - {{from: {a}, to: {b}}}" for a, b in zip(("source", *OPS), OPS, strict=False)
    )
    path.write_text(
        f"name: peers\nchain: {str(chain).lower()}\n"
        f"source: {{topics: [{src}], format: json, key: user.screen_name, "
        f"id: 'field:id', sample_events: {EXAMPLE / 'events.jsonl'}}}\n"
        f"operators:\n{ops}\nedges:\n{edges}\n"
    )
    return path


def elastic_sps(
    bootstrap: str, redis_url: str, tag: str, env: dict[str, str], chain: bool = False
) -> Pipeline:
    """The four operators, ``REPLICAS`` each (``chain``: one pool of the four chained)."""
    write = partial(topology_file, chain=chain)
    return engines.elastic_sps(bootstrap, redis_url, tag, write, [EXAMPLE], env)


def quix_streams(bootstrap: str, redis_url: str, tag: str, _: dict[str, str]) -> Pipeline:
    argv = ["--redis", redis_url, "--prefix", tag]
    return engines.quix_streams(bootstrap, tag, "quix_app.py", argv, [EXAMPLE])


def plain_kafka(bootstrap: str, redis_url: str, tag: str, _: dict[str, str]) -> Pipeline:
    codes = [f"sps_twitter.operators:{op}" for op in OPS]
    return engines.plain_kafka(bootstrap, redis_url, tag, codes, [EXAMPLE])


PEERS: dict[str, tuple[Callable[..., Pipeline], dict[str, str]]] = {
    "elastic-sps": (elastic_sps, {"SPS_TRACK_IDS": "false", "SPS_ADMISSION": "ingress"}),
    "elastic-sps+ids": (elastic_sps, {"SPS_TRACK_IDS": "true", "SPS_ADMISSION": "ingress"}),
    "elastic-sps-chained": (
        partial(elastic_sps, chain=True),
        {"SPS_TRACK_IDS": "false", "SPS_ADMISSION": "ingress"},
    ),
    "elastic-sps-entry": (
        partial(elastic_sps, chain=True),
        {"SPS_TRACK_IDS": "false", "SPS_ADMISSION": "entry"},
    ),
    "quix-streams": (quix_streams, {}),
    "plain-kafka": (plain_kafka, {}),
}


def tweets(first: int, n: int) -> Iterator[dict[str, Any]]:
    for k, t in enumerate(twitter.generate(n, seed=first)):
        yield {**t, "id": first + k, "_meta": {"id": first + k}}


def feed(
    producer: Producer, topic: str, events: list[dict], rate: float | None
) -> dict[str, float]:
    """Produce ``events`` (at ``rate`` a second, or at once); each id's produce time."""
    sent: dict[str, float] = {}
    for k, e in paced(events, rate):
        sent[str(e["id"])] = time.time()
        producer.produce(topic, json.dumps(e).encode(), partition=k % PARTITIONS)
        producer.poll(0)
    producer.flush()
    return sent


def send_all(
    producer: Producer, pipe: Pipeline, collector: Collector, first: int, n: int
) -> tuple[float, float]:
    """Produce ``n`` tweets at once and wait for all their outputs: (start, last output)."""
    events = list(tweets(first, n))
    t0 = time.time()
    feed(producer, pipe.src, events, None)
    return t0, collector.wait_for([str(e["id"]) for e in events], pipe, 600)


def warm(
    producer: Producer, pipe: Pipeline, collector: Collector, rate: float, seconds: float
) -> None:
    """Run the pipeline at ``rate`` for ``seconds``, unmeasured, and wait for the outputs:
    every run starts its own services, so the JVMs (Spark's driver; the broker in its
    first minutes) are still compiling their hot paths. Every peer gets the same warm-up."""
    if seconds > 0:
        events = list(tweets(30_000_000, int(rate * seconds)))
        collector.wait_for(list(feed(producer, pipe.src, events, rate)), pipe, 600)


def measure(peer: str, bootstrap: str, redis_url: str, args: argparse.Namespace) -> dict[str, Any]:
    start, env = PEERS[peer]
    pipe = start(bootstrap, redis_url, fresh_tag("peers"), env)
    with running(pipe, bootstrap) as (collector, producer):
        send_all(producer, pipe, collector, 0, 500)  # workers up, groups joined
        warm(producer, pipe, collector, args.warm_rate, args.warm_seconds)
        t0, last = send_all(producer, pipe, collector, 10_000_000, args.events)
        eps = args.events / (last - t0)
        rate = args.rate or eps / 2  # the same for every peer with --rate
        paced_events = list(tweets(20_000_000, int(rate * args.seconds)))
        cpu0, t0 = cpu_seconds(), time.time()
        sent = feed(producer, pipe.src, paced_events, rate)
        collector.wait_for(list(sent), pipe, 600)
        used = cpu_since(cpu0)
        half_wall = (t0, time.time())
        lat = [(collector.seen[i] - t) * 1000 for i, t in sent.items()]
        return {
            "peer": peer,
            "events_per_s": round(eps),
            **latency_cells(lat),
            "at_events_per_s": round(rate),
            **cpu_cells(used, len(paced_events)),
            **idle_cells(cpu_at_rest(args.idle_seconds), args.idle_seconds),
            "phase": half_wall,
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--seconds", type=float, default=10.0, help="the 50 %% load phase")
    ap.add_argument(
        "--rate", type=float, help="pace every peer at this rate (events/s), not at its half"
    )
    ap.add_argument(
        "--warm-seconds", type=float, default=30.0, help="unmeasured paced run first (0: none)"
    )
    ap.add_argument("--warm-rate", type=float, default=2000.0, help="its events/s")
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
    with embedded.kafka_broker() as bootstrap, embedded.redis_server() as redis_url:
        broker = ready_broker(bootstrap, args.broker_warm_s)

        def one(peer: str, _: dict[str, str]) -> dict[str, Any]:
            return measure(peer, bootstrap, redis_url, args)

        with SpeedProbe() as probe:
            rows = run_all(
                one, names(args.peers), [{}], args.runs, args.json, broker, args.warm_runs, probe
            )
    at_fastest(rows, "cpu_ms_per_event", "cpu_ms_per_event_at_fastest", per_cpu=False)
    report(rows, summary(rows, ("peer",), METRICS), args.json)


if __name__ == "__main__":
    main()
