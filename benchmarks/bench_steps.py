"""The replica's per-event steps alone, in this process: CPU microseconds per event of
``Replica.take_in`` (decode, the engine's core, state, emit, account) on records built in
memory, with a real redis-server and Kafka broker behind the store and the producer
(embedded), no Spark, no consumer. For comparing versions of the per-event path: the
figure moves with the machine's speed, so compare runs of one invocation, or against
its ``probe_ms`` (``harness.machine``).

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_steps.py [--events 20000]
     [--rounds 5] [--cases twitter-chain,q7-keyed] [--json]

* ``twitter-entry``: the pool ``bench_peers.py``'s ``elastic-sps-entry`` runs: the Twitter
  application's four operators chained, admission (LAS) as its first step, the tweets
  as a producer writes them to the source topic;
* ``twitter-chain``: the Twitter application's four operators chained in one pool
  (``parse..store``), envelopes in, as a pool after the entry step gets them;
* ``q7-keyed``: Nexmark q7's ``per_auction..partial`` (a keyed 10 s tumbling window
  heading a stateless member), bids as ``bids`` sends them, one partition.

Each round serves ``--events`` records in chunks of ``replica.CHUNK`` on a fresh
partition (fresh state, fresh applied ids), then its checkpoint; the figure is the
thread's CPU time (``time.thread_time``) per event, min and median over the rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import yaml
from sps_nexmark.generate import Generator
from sps_twitter.operators import generate as tweets

from benchmarks.harness.machine import unit_ms
from benchmarks.harness.records import Record
from elastic_sps.io import embedded
from elastic_sps.io.envelope import Envelope
from elastic_sps.io.topics import Topics
from elastic_sps.model import topology
from elastic_sps.services.dataplane.entry_slot import EntryTask
from elastic_sps.services.dataplane.feed import Batch
from elastic_sps.services.dataplane.group import GroupRun
from elastic_sps.services.dataplane.options import SourceOptions
from elastic_sps.services.dataplane.publishing import publish
from elastic_sps.services.dataplane.replica import CHUNK, Replica
from elastic_sps.services.dataplane.slots import Slot
from elastic_sps.settings import DataplaneSettings

ROOT = Path(__file__).resolve().parents[1]
TWITTER_OPS = ("parse", "classify_content", "classify_author", "store")


def twitter_doc(out: str) -> tuple[dict[str, Any], str]:
    ops = [
        {"name": op, "code": f"sps_twitter.operators:{op}", "et_ms": 0.05, "max_replicas": 2}
        | ({"output": out} if op == "store" else {})
        for op in TWITTER_OPS
    ]
    edges = [
        {"from": a, "to": b} for a, b in zip(("source", *TWITTER_OPS), TWITTER_OPS, strict=False)
    ]
    return {"operators": ops, "edges": edges}, "parse..store"


def twitter_entry_doc(out: str) -> tuple[dict[str, Any], str]:
    doc, name = twitter_doc(out)
    source = {"topics": [f"{out}.src"], "format": "json", "key": "field:user.screen_name",
              "id": "field:id"}  # fmt: skip
    return {**doc, "source": source}, name


def twitter_records(n: int, seed: int) -> Iterator[bytes]:
    for k, t in enumerate(tweets(n, seed=seed)):
        yield orjson.dumps({**t, "id": f"t{seed}-{k}"})


def twitter_events(n: int, seed: int) -> Iterator[tuple[str, str, Any, float]]:
    for k, t in enumerate(tweets(n, seed=seed)):
        yield f"t{seed}-{k}", "source", {**t, "id": k}, time.time()


def q7_doc(out: str) -> tuple[dict[str, Any], str]:
    doc = yaml.safe_load((ROOT / "examples" / "nexmark" / "q7.yaml").read_text())
    doc.pop("source")
    for op in doc["operators"]:
        op["max_replicas"] = 1  # one partition holds every key: every event is served
        if "output" in op:
            op["output"] = out
    return doc, "per_auction..partial"


def q7_events(n: int, seed: int) -> Iterator[tuple[str, str, Any, float]]:
    made = 0
    for k, ev in enumerate(Generator(10_000.0, seed).events(n * 2)):
        if "bid" in ev and made < n:
            made += 1
            yield f"b{seed}-{k}", "bids", ev["bid"], ev["bid"]["dateTime"] / 1000.0


# case -> (its topology and pool, its records' values, whether the pool is the entry step)
CASES: dict[str, tuple[Callable[[str], tuple[dict, str]], Callable[..., Iterator], bool]] = {
    "twitter-entry": (twitter_entry_doc, twitter_records, True),
    "twitter-chain": (twitter_doc, twitter_events, False),
    "q7-keyed": (q7_doc, q7_events, False),
}


def group_for(case: str, bootstrap: str, redis_url: str, folder: Path) -> GroupRun:
    tag = f"bs{uuid.uuid4().hex[:6]}"
    doc, name = CASES[case][0](f"{tag}.out")
    path = folder / f"{tag}.yaml"
    path.write_text(yaml.safe_dump({**doc, "name": tag}))
    topo = topology.load(path)
    settings = DataplaneSettings(
        kafka_bootstrap_servers=bootstrap,
        redis_url=redis_url,
        key_prefix=tag,
        topics=Topics(deadletter=f"{tag}.deadletter"),
        track_ids=False,
    )
    entry = (topo.source.topics[0], 1) if CASES[case][2] else None
    return GroupRun(SourceOptions.build(settings, topo, [name], "none", entry), name, 1)


def chunks(case: str, n: int, seed: int) -> list[list[Any]]:
    now_ms = int(time.time() * 1000)
    made = CASES[case][1](n, seed)
    values = (
        made
        if CASES[case][2]
        else (Envelope(i, time.time(), s, p, evt=t).encode() for i, s, p, t in made)
    )
    records = [Record(0, k, v, ts_ms=now_ms) for k, v in enumerate(values)]
    at = time.perf_counter()
    return [[Batch(records[k : k + CHUNK], at)] for k in range(0, len(records), CHUNK)]


def one_round(g: GroupRun, work: list[list[Any]], events: int) -> tuple[float, int]:
    """CPU microseconds per event of serving ``work`` through one replica and its
    checkpoint (the commit of state and offsets included), and the events it processed."""
    slot = Slot(0, 0, 0, owner=0)
    if g.admits:
        EntryTask(g, (slot,))  # the task's part of the entry step: the partition declared
    replica = Replica(g, 0)
    replica.serve_planned([slot], {0: []})
    began = time.thread_time()
    for chunk in work:
        replica.take_in(chunk)
        g.producer.send()
    results = replica.finish()
    publish(g, results)
    took = time.thread_time() - began
    g.producer.flush()
    return 1e6 * took / events, sum(r.processed for r in results)


def run_case(case: str, events: int, rounds: int, bootstrap: str, redis_url: str) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="sps-steps-"))
    per_event = []
    for k in range(rounds + 1):  # the first warms the imports and clients
        g = group_for(case, bootstrap, redis_url, folder)
        work = chunks(case, events, k)
        us, processed = one_round(g, work, events)
        if processed != events:  # a figure over events the steps did not serve is no figure
            raise RuntimeError(f"{case}: {processed} of {events} events processed")
        if k > 0:
            per_event.append(us)
    return {
        "case": case,
        "events": events,
        "cpu_us_per_event_min": round(min(per_event), 2),
        "cpu_us_per_event_median": round(statistics.median(per_event), 2),
        "rounds": [round(x, 2) for x in per_event],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with embedded.kafka_broker() as bootstrap, embedded.redis_server() as redis_url:
        for case in args.cases.split(","):
            row = run_case(case, args.events, args.rounds, bootstrap, redis_url)
            row["probe_ms"] = round(unit_ms(), 2)
            print(json.dumps(row) if args.json else row)


if __name__ == "__main__":
    main()
