"""What keyed state costs, live: a resize of a keyed operator holding many keys beside a
stateless one's, and the CPU per event of the same operator keyed and unkeyed.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_state.py [--keys 100000]
     [--rate 400] [--events 20000] [--runs 1] [--json]

One operator (``benchmarks.harness.keyed_ops:running_total``, a running total per key) on
the embedded broker, redis-server and Spark (local[2]), fed by this process; three
variants in one invocation, each on a fresh dataplane:

* ``keyed``: ``key: field:k``, its state holding ``--keys`` keys (written before the
  start), ``--rate`` events/s over all keys; resized 1 -> 4 at 6 s and 4 -> 2 at 11 s;
* ``keyed-still``: the same without the resizes (the baseline for latency);
* ``unkeyed``: no key (this process routes round robin over the active replicas, as the
  load-aware router would at equal load), the same resizes.

Per variant: each partition's wait from its last commit to its next task's first event
(``pauses``: moved and unmoved partitions apart; a stateless operator has none), the
output latency (sent -> output read here) p50/p99 of events in partitions that did not
move, in the 4 s after each resize, and over the run; then a burst of ``--events`` events
at 2 replicas and the CPU seconds per event of the dataplane's processes (driver JVM and
Python, Spark's Python workers) while it is served. With ``--runs N`` (N > 1) the three
variants alternate N times: ``{"runs": [...], "medians": {...}}``, the target's ratio
taken between the medians of the two keyed variants' unmoved p99 (``medians``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import redis
import yaml

from benchmarks.harness.collector import Collector
from benchmarks.harness.processes import ServiceProcess, cpu_seconds
from elastic_sps.contracts.plan import PlanRecord
from elastic_sps.io import embedded
from elastic_sps.io.envelope import Envelope
from elastic_sps.io.knowledge_base import Keys, KnowledgeBase
from elastic_sps.io.state_store import PartitionStore
from elastic_sps.io.tracked_producer import TrackedProducer
from elastic_sps.model import keyed as keyed_mod
from elastic_sps.model import topology
from elastic_sps.services.execute.core import Executor

POOL = 4
RESIZES = ((6.0, 4), (11.0, 2))  # (seconds into the feed, replicas)
FEED_S = 16.0
WINDOW_AFTER_S = 4.0
DATAPLANE_ROLES = ("spark python workers", "spark driver JVM", "dataplane driver (Python)")


def topology_file(tag: str, keyed: bool, out: Path) -> Path:
    op: dict[str, Any] = {
        "name": "total",
        "code": "benchmarks.harness.keyed_ops:running_total",
        "et_ms": 0.5,
        "max_replicas": POOL,
        "output": f"bench.state.{tag}",
    }
    if keyed:
        op["key"] = "field:k"
    doc = {"name": f"state-{tag}", "operators": [op], "edges": [{"from": "source", "to": "total"}]}
    path = out / f"{tag}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def prepopulate(r: Any, keys: Keys, n: int, groups: int) -> None:
    """``n`` keys' state, committed at offset 0 of each partition."""
    stores = {p: PartitionStore(r, keys, "total", p) for p in range(POOL)}
    for k in range(n):
        key = f"k{k}"
        g = keyed_mod.key_group(key, groups)
        store = stores[keyed_mod.partition_of_group(g, groups, POOL)]
        store.put("s", g, key, {"n": 0, "total": 0})
    for store in stores.values():
        assert store.commit(0, owner=0)


def feed(p: TrackedProducer, kb: KnowledgeBase, keyed: bool, n_keys: int, rate: float,
         seconds: float, prefix: str, start: int = 0) -> int:  # fmt: skip
    """``rate`` events/s for ``seconds`` (0: as fast as possible, ``rate`` events)."""
    topic, op = kb.keys.topic("total"), topology.Operator("total", 0.5, 1, POOL)
    sent, t0, active = 0, time.monotonic(), 1
    total = int(rate * seconds) if seconds else int(rate)
    for k in range(start, start + total):
        if not keyed and k % 100 == 0:
            active = kb.active(op)
        key = f"k{(k * 7919) % n_keys}"
        body = {"k": key, "v": 1, "sent": time.time()}
        j = keyed_mod.partition_of_key(key, 128, POOL) if keyed else k % active
        p.produce(topic, Envelope(f"{prefix}{k}", time.time(), "source", body).encode(), j)
        sent += 1
        if seconds and (ahead := t0 + sent / rate - time.monotonic()) > 0:
            p.p.poll(0)
            time.sleep(ahead)
    p.flush()
    return sent


def _latency(rows: list[tuple[float, float]]) -> dict[str, float | None]:
    ms = [1000 * (read - sent) for sent, read in rows]
    if not ms:
        return {"p50": None, "p99": None, "n": 0}
    return {"p50": round(float(np.percentile(ms, 50)), 1),
            "p99": round(float(np.percentile(ms, 99)), 1), "n": len(ms)}  # fmt: skip


def run_variant(bootstrap: str, redis_url: str, name: str, args: argparse.Namespace) -> dict:
    keyed, resize = name != "unkeyed", name != "keyed-still"
    tag = f"{name.replace('-', '')}{uuid.uuid4().hex[:4]}"
    keys, r = Keys(tag), redis.Redis.from_url(redis_url)
    kb = KnowledgeBase(r, keys)
    topo_path = topology_file(tag, keyed, Path(tempfile.mkdtemp()))
    topo = topology.load(topo_path)
    if keyed:
        prepopulate(r, keys, args.keys, topo["total"].key_groups)
    r.set(keys.active("total"), 1)
    env = {"SPS_KAFKA_BOOTSTRAP_SERVERS": bootstrap, "SPS_REDIS_URL": redis_url,
           "SPS_KEY_PREFIX": tag, "SPS_TOPOLOGY": str(topo_path),
           "SPS_CHECKPOINT_DIR": f"/tmp/sps-bench-{tag}", "PYTHONPATH": ".",
           # fed on the operator's topic, as the ingress would
           "SPS_ADMISSION": "ingress"}  # fmt: skip
    proc = ServiceProcess("dataplane", env).start()
    outputs = Collector(bootstrap, f"bench.state.{tag}")
    outputs.start()
    try:
        while not kb.runs():
            if not proc.alive():
                raise RuntimeError(proc.log.read_text()[-3000:])
            time.sleep(0.2)
        p = TrackedProducer(bootstrap, r, keys)
        warm = feed(p, kb, keyed, args.keys, args.rate, 3.0, "w")
        outputs.wait_for_count(warm, 120)
        t0 = time.time()
        ex = Executor(r, topo, keys)
        changes = []
        if resize:

            def resizer() -> None:
                for k, (at, n) in enumerate(RESIZES):
                    time.sleep(max(0.0, t0 + at - time.time()))
                    plan = PlanRecord(plan_id=f"b{k}", interval=0, targets={"total": n},
                                      closed_at=time.time(), decided_at=time.time())  # fmt: skip
                    ex.apply(plan)
                    changes.append((time.time(), n))

            threading.Thread(target=resizer, daemon=True).start()
        sent = feed(p, kb, keyed, args.keys, args.rate, FEED_S, "e")
        outputs.wait_for_count(warm + sent, 120)
        out = _resize_figures(kb, outputs, changes or [(t0 + at, n) for at, n in RESIZES], keyed)
        r.set(keys.active("total"), 2)
        time.sleep(2)
        before = cpu_seconds()
        burst = feed(p, kb, keyed, args.keys, args.events, 0, "b")
        outputs.wait_for_count(warm + sent + burst, 120)
        after = cpu_seconds()
        cpu = sum(after.get(k, 0) - before.get(k, 0) for k in DATAPLANE_ROLES)
        out["cpu_ms_per_event"] = round(1000 * cpu / burst, 4)
        out["lost"] = warm + sent + burst - len(outputs.seen)
        return out
    finally:
        outputs.stop()
        proc.stop(timeout=60)


def _resize_figures(kb: KnowledgeBase, outputs: Collector, changes: list, keyed: bool) -> dict:
    """Pauses of moved and unmoved partitions after each change; output latency of the
    events in unmoved partitions in the ``WINDOW_AFTER_S`` after each change."""
    pauses = kb.pauses("total")
    moved_all: set[int] = set()
    windows: list[tuple[float, float]] = []
    before = 1
    for at, n in changes:
        moved_all |= set(keyed_mod.moved_partitions(POOL, before, n))
        windows.append((at, at + WINDOW_AFTER_S))
        before = n
    in_window = [p for p in pauses if any(a <= p["at"] < b for a, b in windows)]
    moved = [p["pause_s"] for p in in_window if p["moved"]]
    still = [p["pause_s"] for p in in_window if not p["moved"]]
    rows_still, rows_all = [], []
    for event_id, read in outputs.seen.items():
        sent, key = outputs.first[event_id]["sent"], outputs.first[event_id]["k"]
        rows_all.append((sent, read))
        part = keyed_mod.partition_of_key(key, 128, POOL)
        if any(a <= sent < b for a, b in windows) and (not keyed or part not in moved_all):
            rows_still.append((sent, read))

    def q(xs: list[float]) -> dict[str, float | None]:
        if not xs:
            return {"median_ms": None, "p99_ms": None, "n": 0}
        return {"median_ms": round(1000 * float(np.median(xs)), 1),
                "p99_ms": round(1000 * float(np.percentile(xs, 99)), 1), "n": len(xs)}  # fmt: skip

    return {
        "pause_moved": q(moved),
        "pause_unmoved": q(still),
        "latency_after_resize_unmoved": _latency(rows_still),
        "latency_run": _latency(rows_all),
    }


VARIANTS = ("keyed", "keyed-still", "unkeyed")


def ratios(run: dict[str, Any]) -> dict[str, Any]:
    """One run's variants with the unmoved p99 after a resize against the still run's, and
    the keyed operator's CPU per event against the unkeyed one's."""
    base = run["keyed-still"]["latency_after_resize_unmoved"]["p99"]
    got = run["keyed"]["latency_after_resize_unmoved"]["p99"]
    cpu_k, cpu_u = run["keyed"]["cpu_ms_per_event"], run["unkeyed"]["cpu_ms_per_event"]
    return {
        **run,
        "unmoved_p99_ratio": round(got / base, 2) if base and got else None,
        "cpu_ratio_keyed_to_unkeyed": round(cpu_k / cpu_u, 2) if cpu_u else None,
    }


def medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Over runs: the median of each variant's unmoved p99 after a resize, their ratio
    (the target's figure), the median of the moved pauses' medians and p99s, and every
    event lost in any run."""

    def med(xs: list[Any]) -> float | None:
        got = [x for x in xs if x is not None]
        return round(float(np.median(got)), 1) if got else None

    keyed = med([r["keyed"]["latency_after_resize_unmoved"]["p99"] for r in runs])
    still = med([r["keyed-still"]["latency_after_resize_unmoved"]["p99"] for r in runs])
    return {
        "unmoved_p99_keyed": keyed,
        "unmoved_p99_still": still,
        "unmoved_p99_ratio": round(keyed / still, 2) if keyed and still else None,
        "pause_moved_median_ms": med([r["keyed"]["pause_moved"]["median_ms"] for r in runs]),
        "pause_moved_p99_ms": med([r["keyed"]["pause_moved"]["p99_ms"] for r in runs]),
        "lost": sum(r[name]["lost"] for r in runs for name in VARIANTS),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--rate", type=float, default=400.0)
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    runs: list[dict[str, Any]] = []
    with embedded.kafka_broker() as bootstrap, embedded.redis_server() as redis_url:
        for _ in range(args.runs):  # the variants alternate, run after run
            run = {name: run_variant(bootstrap, redis_url, name, args) for name in VARIANTS}
            runs.append(ratios(run))
    out = runs[0] if args.runs == 1 else {"runs": runs, "medians": medians(runs)}
    print(json.dumps(out, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
