"""The same pipeline beside what a user would pick instead: the elastic-sps dataplane at a
fixed replica count, quix-streams, and a plain confluent-kafka loop per operator.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_peers.py [--runs 3] [--events 20000]
     [--json]   (quix-streams runs from .venv-peers: `make peers-venv`)

The pipeline: the Twitter application's four operator functions (``examples/twitter``,
parse → classify_content → classify_author → store, the sink's counts in Redis), the
same generated tweets, one embedded Apache Kafka broker and redis-server for all, 2
partitions on the input and between operators, one invocation, the peers alternating run
by run, each run on fresh topics:

* ``elastic-sps``: the ingress and the PySpark dataplane, 2 replicas per operator
  (``SPS_FIXED_REPLICAS``), with the id ledger off (``elastic-sps``) and on
  (``elastic-sps+ids``: 8 Redis set-adds per event on this chain, what `demo` runs with),
  and with the four operators chained into one pool of 2 (``elastic-sps-chained``:
  ``chain: true`` in the topology, one Kafka hop instead of four);
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
makes more hops makes the broker work more; by role in the rows). Printed:
min/median/max per peer; ``--json``: the rows.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import redis
from confluent_kafka import Consumer, Producer
from sps_twitter import operators as twitter

from elastic_sps.io import embedded
from elastic_sps.io.kafka_admin import ensure_topics
from elastic_sps.io.kafka_io import take_ready
from elastic_sps.io.knowledge_base import Keys, KnowledgeBase
from elastic_sps.model import topology
from tests.support.processes import ServiceProcess

ROOT = Path(__file__).resolve().parents[1]
PEERS_PYTHON = ROOT / ".venv-peers" / "bin" / "python"
EXAMPLE = ROOT / "examples" / "twitter"
OPS = ("parse", "classify_content", "classify_author", "store")
PARTITIONS = 2
REPLICAS = 2


# What each process is, from its command line (first match wins).
ROLES = (
    ("kafka.Kafka", "broker"),
    ("redis-server", "redis"),
    ("elastic_sps.services.ingress", "ingress"),
    ("pyspark.daemon", "spark python workers"),
    ("org.apache.spark", "spark driver JVM"),
    ("elastic_sps.services.dataplane", "dataplane driver (Python)"),
    ("quix_app.py", "quix-streams"),
    ("plain_loop.py", "plain-kafka"),
)


def cpu_seconds(roles: tuple[tuple[str, str], ...] = ROLES) -> dict[str, float]:
    """CPU seconds (user + system) so far of this benchmark's processes and their
    descendants (the broker, redis-server, the services, Spark's JVM and workers), by role
    (``ROLES``; this process, the producer and the collectors, is "bench")."""
    tick = os.sysconf("SC_CLK_TCK")
    me = os.getpid()
    procs: dict[int, tuple[int, float, str]] = {}  # pid -> (parent, cpu seconds, cmdline)
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        procs[int(d.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick, cmd)
    out: dict[str, float] = {}
    for pid, (_, cpu, cmd) in procs.items():
        up = pid
        while up not in (me, 0, 1) and up in procs:  # ours: descended from this process
            up = procs[up][0]
        if up != me:
            continue
        role = "bench" if pid == me else next((r for n, r in roles if n in cmd), "other")
        out[role] = out.get(role, 0.0) + cpu
    return out


@dataclass
class Pipeline:
    """A running peer: where to write, where its outputs appear, how to stop it."""

    src: str
    dst: str
    procs: list[subprocess.Popen[bytes] | ServiceProcess] = field(default_factory=list)
    operators: tuple[str, ...] = ()  # elastic-sps: its pools (chained: the one chain)

    def alive(self) -> bool:
        return all(
            (p.alive() if isinstance(p, ServiceProcess) else p.poll() is None) for p in self.procs
        )

    def stop(self) -> None:
        for p in self.procs:
            if isinstance(p, ServiceProcess):
                p.stop(timeout=60)
            else:
                p.terminate()
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()


def _spawn(argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A peer's process, its output in a log file that outlives it (for a failed run)."""
    fd, _ = tempfile.mkstemp(prefix="sps-peer-", suffix=".log")
    return subprocess.Popen(argv, env={**os.environ, **env}, stdout=fd, stderr=fd)


def plain_kafka(bootstrap: str, redis_url: str, tag: str, _: dict[str, str]) -> Pipeline:
    topics = [f"{tag}.in", *(f"{tag}.{op}" for op in OPS)]
    ensure_topics(bootstrap, topics, PARTITIONS)
    pipe = Pipeline(topics[0], topics[-1])
    for k, op in enumerate(OPS):
        argv = [sys.executable, str(ROOT / "benchmarks" / "peers" / "plain_loop.py")]
        argv += ["--bootstrap", bootstrap, "--redis", redis_url, "--prefix", tag]
        argv += ["--code", f"sps_twitter.operators:{op}", "--group", f"{tag}-{op}"]
        argv += ["--src", topics[k], "--dst", topics[k + 1]]
        pipe.procs.append(_spawn(argv, {"PYTHONPATH": str(EXAMPLE)}))
    return pipe


def quix_streams(bootstrap: str, redis_url: str, tag: str, _: dict[str, str]) -> Pipeline:
    if not PEERS_PYTHON.exists():
        raise SystemExit(f"{PEERS_PYTHON} is missing: make peers-venv")
    pipe = Pipeline(f"{tag}.in", f"{tag}.out")
    ensure_topics(bootstrap, [pipe.src, pipe.dst], PARTITIONS)
    for _k in range(PARTITIONS):
        argv = [str(PEERS_PYTHON), str(ROOT / "benchmarks" / "peers" / "quix_app.py")]
        argv += ["--bootstrap", bootstrap, "--redis", redis_url, "--prefix", tag]
        argv += ["--group", tag, "--src", pipe.src, "--dst", pipe.dst]
        pipe.procs.append(_spawn(argv, {"PYTHONPATH": str(EXAMPLE)}))
    return pipe


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
    pipe = Pipeline(f"{tag}.in", f"{tag}.out")
    ensure_topics(bootstrap, [pipe.src, pipe.dst], PARTITIONS)
    folder = Path(tempfile.mkdtemp(prefix="sps-peers-"))
    topo_file = topology_file(folder, pipe.src, pipe.dst, chain)
    common = {
        "SPS_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "SPS_REDIS_URL": redis_url,
        "SPS_KEY_PREFIX": tag,
        "SPS_TOPOLOGY": str(topo_file),
        "SPS_CHECKPOINT_DIR": str(folder / "ckpt"),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(EXAMPLE)]),
        **env,
    }
    pipe.operators = topology.load(topo_file).names  # chained: the one chain's name
    pipe.procs += start_services(redis_url, tag, common, pipe.operators, REPLICAS)
    return pipe


def start_services(
    redis_url: str,
    tag: str,
    env: dict[str, str],
    operators: tuple[str, ...],
    replicas: int,
    fixed: bool = True,
) -> list[ServiceProcess]:
    """The dataplane (``replicas`` per operator; ``fixed``: held there, else as the active
    counts in Redis say) and, once its query runs, the ingress."""
    r = redis.Redis.from_url(redis_url)
    for op in operators:
        r.set(Keys(tag).active(op), replicas)
    held = {"SPS_FIXED_REPLICAS": str(replicas)} if fixed else {}
    dataplane = ServiceProcess("dataplane", {**env, **held}).start()
    deadline = time.monotonic() + 240
    while not KnowledgeBase(r, tag).runs():
        if not dataplane.alive() or time.monotonic() > deadline:
            raise RuntimeError(dataplane.log.read_text()[-3000:])
        time.sleep(0.3)
    return [dataplane, ServiceProcess("ingress", env).start()]


PEERS: dict[str, tuple[Callable[..., Pipeline], dict[str, str]]] = {
    "elastic-sps": (elastic_sps, {"SPS_TRACK_IDS": "false"}),
    "elastic-sps+ids": (elastic_sps, {"SPS_TRACK_IDS": "true"}),
    "elastic-sps-chained": (partial(elastic_sps, chain=True), {"SPS_TRACK_IDS": "false"}),
    "quix-streams": (quix_streams, {}),
    "plain-kafka": (plain_kafka, {}),
}


def event_id(value: dict[str, Any]) -> str:
    """The peers carry ``_meta``; elastic-sps's sink writes ``{"id", "value"}``."""
    return str(value["_meta"]["id"] if "_meta" in value else value["id"])


class Collector(threading.Thread):
    """Reads the sink's topic from the start; the first time each id is seen."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.seen: dict[str, float] = {}
        self.halt = threading.Event()
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": uuid.uuid4().hex,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        self.consumer.subscribe([topic])

    def run(self) -> None:
        while not self.halt.is_set():
            # as soon as a record is there: consume(n, timeout) alone waits its whole
            # timeout at a trickle, and that wait was counted in every peer's latency
            for m in take_ready(self.consumer, 1000, 0.05):
                if not m.error():
                    self.seen.setdefault(event_id(json.loads(m.value())), time.time())
        self.consumer.close()

    def wait_for(self, ids: list[str], pipe: Pipeline, timeout: float) -> float:
        """Wait until every id has been seen; the last one's time."""
        deadline = time.monotonic() + timeout
        while any(i not in self.seen for i in ids):
            if time.monotonic() > deadline or not pipe.alive():
                missing = sum(i not in self.seen for i in ids)
                raise RuntimeError(f"{missing} of {len(ids)} outputs missing")
            time.sleep(0.05)
        return max(self.seen[i] for i in ids)


def tweets(first: int, n: int) -> Iterator[dict[str, Any]]:
    for k, t in enumerate(twitter.generate(n, seed=first)):
        yield {**t, "id": first + k, "_meta": {"id": first + k}}


def feed(
    producer: Producer, topic: str, events: list[dict], rate: float | None
) -> dict[str, float]:
    """Produce ``events`` (at ``rate`` a second, or at once); each id's produce time."""
    sent: dict[str, float] = {}
    t0 = time.monotonic()
    for k, e in enumerate(events):
        if rate:
            ahead = t0 + k / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
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
    """Run the pipeline at ``rate`` for ``seconds``, unmeasured, and wait for the outputs.
    Every run starts its own services, so the JVMs (Spark's driver; the broker in its
    first minutes) are still compiling their hot paths: in a 90 s paced run of the chained
    pipeline the time per batch with no task reading fell from 0.5-1.7 s (the first
    10-20 s) to 0.3 s (the median over the run; ``bench_hops.py``). Every peer gets the
    same warm-up."""
    if seconds > 0:
        events = list(tweets(30_000_000, int(rate * seconds)))
        collector.wait_for(list(feed(producer, pipe.src, events, rate)), pipe, 600)


def measure(peer: str, bootstrap: str, redis_url: str, args: argparse.Namespace) -> dict[str, Any]:
    start, env = PEERS[peer]
    tag = f"peers{uuid.uuid4().hex[:6]}"
    pipe = start(bootstrap, redis_url, tag, env)
    collector = Collector(bootstrap, pipe.dst)
    collector.start()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    try:
        send_all(producer, pipe, collector, 0, 500)  # workers up, groups joined
        warm(producer, pipe, collector, args.warm_rate, args.warm_seconds)
        t0, last = send_all(producer, pipe, collector, 10_000_000, args.events)
        eps = args.events / (last - t0)
        rate = args.rate or eps / 2  # the same for every peer with --rate
        paced = list(tweets(20_000_000, int(rate * args.seconds)))
        cpu0 = cpu_seconds()
        sent = feed(producer, pipe.src, paced, rate)
        collector.wait_for(list(sent), pipe, 600)
        used = {k: v - cpu0.get(k, 0.0) for k, v in cpu_seconds().items()}
        lat = np.array([collector.seen[i] - t for i, t in sent.items()]) * 1000
        return {
            "peer": peer,
            "events_per_s": round(eps),
            "p50_ms": round(float(np.percentile(lat, 50)), 1),
            "p99_ms": round(float(np.percentile(lat, 99)), 1),
            "at_events_per_s": round(rate),
            # CPU the whole machine's share of this run spent per paced event (the broker,
            # redis-server, the peer's processes; "bench" is the feed and the collector)
            "cpu_ms_per_event": round(1000 * sum(used.values()) / len(paced), 4),
            "cpu_ms_per_event_by_role": {
                k: round(1000 * v / len(paced), 4) for k, v in sorted(used.items())
            },
        }
    finally:
        collector.halt.set()
        collector.join(10)
        pipe.stop()


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for peer in dict.fromkeys(r["peer"] for r in rows):
        mine = [r for r in rows if r["peer"] == peer]
        row: dict[str, Any] = {"peer": peer, "runs": len(mine)}
        for key in ("events_per_s", "p50_ms", "p99_ms", "cpu_ms_per_event"):
            vals = [r[key] for r in mine]
            row[key] = {"min": min(vals), "median": statistics.median(vals), "max": max(vals)}
        out.append(row)
    return out


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
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    rows = []
    with embedded.kafka_broker() as bootstrap, embedded.redis_server() as redis_url:
        for run in range(args.runs):
            for peer in peers if run % 2 == 0 else reversed(peers):  # alternating
                row = {**measure(peer, bootstrap, redis_url, args), "run": run}
                rows.append(row)
                if not args.json:
                    print(json.dumps(row), flush=True)
    if args.json:
        print(json.dumps({"rows": rows, "summary": summary(rows)}))
        return
    for s in summary(rows):
        cells = [
            f"{k} {v['min']}/{v['median']}/{v['max']}"
            for k, v in s.items()
            if k not in ("peer", "runs")
        ]
        print(f"{s['peer']:<16} " + "  ".join(cells) + "  (min/median/max)")


if __name__ == "__main__":
    main()
