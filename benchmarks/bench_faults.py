"""Faults injected into the running embedded ensemble, one per run, and what each cost.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_faults.py [--faults kill:monitor,redis]
     [--duration 40] [--at 15] [--json]

Each run replays the same trace through a fresh ensemble (id ledger on) and, ``--at``
seconds into the replay, injects one fault:

* ``kill:<service>``: ``kill -9`` of ingress (run with ``SPS_ADMISSION=ingress``, where
  the service admits), monitor, analyze, plan, execute, or the dataplane (the Spark
  driver: its JVM and workers die with it);
* ``kill:worker``: ``kill -9`` of every Spark Python worker process of the moment (the
  tasks they ran fail and Spark retries them; the daemon forks new workers);
* ``redis``: redis-server stopped and started again on its port (append-only file kept);
* ``malformed``: for the rest of the replay, 1 % of the events sent again as malformed
  records onto every topic: the ingress, each operator topic, and the control topics.

``--stateful``: the two-stage orders pipeline instead (``orders_check.PIPELINE``: a
stateless validation pool, a keyed 5 s window per customer, a keyed ledger over the
window results, and a keyed running total per order, fed a generated file with event
times), and per fault whether every output is exact (``state_exact``: each order's
running total, every window that must have closed out once and exact, and the ledger's
running sums, against the events file, ``benchmarks/harness/orders_check.py``; a repeated
output must carry the same value).

``--standby`` (the default; ``--no-standby`` for none): ``up`` starts a second dataplane
process that waits, warm, for the first one's lease to lapse (``kill:dataplane`` then
measures the takeover, not a cold start).

Per fault it reports the events sent, completed (distinct ids at the sinks), shed,
expired, dead-lettered, lost (by id, per stage: ``shared/io/id_ledger.py``), duplicates
(processings beyond one per id), the restarts the supervisor made, and ``recovered_s``:
seconds from the fault until the per-interval latency and backlog are back within a band
around their pre-fault level (``shared/simulation/recovery.py`` states the band; ``left_band`` says
whether the fault moved them out of it at all: 0 s then means "never disturbed";
``None``: not back within the run).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from confluent_kafka import Producer

from elastic_sps.io.knowledge_base import Keys, KnowledgeBase
from elastic_sps.io.tracked_producer import TrackedProducer
from elastic_sps.model.topology import Topology
from elastic_sps.services.dataplane.daemon import serves_tasks
from elastic_sps.services.ensemble import demo
from elastic_sps.settings import ServiceSettings
from elastic_sps.simulation import recovery

SERVICES = ("ingress", "monitor", "analyze", "plan", "execute", "dataplane")
DEFAULT_FAULTS = [*(f"kill:{s}" for s in SERVICES), "kill:worker", "redis", "malformed"]


def inject(fault: str, ens: Any, at_s: float, stop: threading.Event, log: dict) -> None:
    """Wait ``at_s``, then break the ensemble as ``fault`` says; ``log`` gets the time."""
    if stop.wait(at_s):
        return
    log["at"] = time.time()
    if fault == "kill:worker":
        log["killed_pid"] = kill_python_worker(ens)
    elif fault.startswith("kill:"):
        child = next(c for c in ens.children if c.name == fault.split(":", 1)[1])
        os.kill(child.proc.pid, signal.SIGKILL)
    elif fault == "redis":
        ens.redis_server.restart()
    elif fault == "malformed":
        send_malformed(ens, stop, log)
    else:
        raise ValueError(f"unknown fault {fault!r}")


def kill_python_worker(ens: Any) -> list[int]:
    """``kill -9`` of the dataplane's Spark Python workers (the processes Spark's Python
    daemon forked, not the daemon itself: an idle one alone fails no task); their pids."""
    dataplane = next(c for c in ens.children if c.name == "dataplane").proc.pid
    parents: dict[int, int] = {}
    cmds: dict[int, str] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text().rsplit(")", 1)[1].split()
                cmds[int(d.name)] = (d / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            parents[int(d.name)] = int(stat[1])

    def under(pid: int) -> bool:
        while pid not in (0, 1, dataplane) and pid in parents:
            pid = parents[pid]
        return pid == dataplane

    daemons = {p for p, c in cmds.items() if serves_tasks(c.split("\0")) and under(p)}
    workers = [p for p in daemons if parents.get(p) in daemons]
    if not workers:
        raise RuntimeError("no Spark Python worker to kill")
    for pid in workers:
        os.kill(pid, signal.SIGKILL)
    return workers


def send_malformed(ens: Any, stop: threading.Event, log: dict) -> int:
    """1 % of the ingress's admitted events, once a second, as broken records onto every
    topic (operator topics through the end registry, so the dataplane reads them)."""
    import redis

    r = redis.Redis.from_url(ens.redis_url)
    keys = Keys(ens.env["SPS_KEY_PREFIX"])
    topo = _topology(ens)
    topics = ServiceSettings().topics
    control = [topics.ingress, topics.metrics, topics.stats, topics.analysis, topics.plans]
    plain = Producer({"bootstrap.servers": ens.bootstrap})
    tracked = TrackedProducer(ens.bootstrap, r, keys)
    sent, seen = 0, 0.0
    while not stop.wait(1.0):
        admitted = float(KnowledgeBase(r, keys).ingress_counts().get("received", 0))
        owed = int((admitted - seen) * 0.01)
        if owed <= 0:
            continue
        seen = admitted
        for k in range(owed):
            for topic in control:
                plain.produce(topic, b"{malformed " + str(k).encode())
            for op in topo.operators:
                tracked.produce(keys.topic(op.name), b"{malformed", partition=k % op.min_replicas)
            sent += 1
        plain.flush(10)
        tracked.flush()
        log["malformed"] = sent
    return sent


def _topology(ens: Any) -> Topology:
    from elastic_sps.model import topology

    return topology.load(ens.env["SPS_TOPOLOGY"])


def stateful_setup(out: Path) -> tuple[str, str, list[dict]]:
    """The stateful topology's file and a generated events file (60 orders per second
    of event time: 2 s windows close as the replay runs)."""
    from sps_orders.generate import orders

    from benchmarks.harness import orders_check

    out.mkdir(parents=True, exist_ok=True)
    (out / "orders.yaml").write_text(orders_check.PIPELINE)
    events = orders(30_000, rate=60.0, seed=5)
    (out / "orders.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return str(out / "orders.yaml"), str(out / "orders.jsonl"), events


def state_exact(rep: dict[str, Any], events: list[dict]) -> bool:
    from benchmarks.harness.orders_check import (
        WINDOW_S,
        check_ledger,
        check_totals,
        check_windows,
        ledger_windows,
        outputs_once,
    )

    totals, differ_t = outputs_once(rep["outputs"]["orders.totals"])
    ledger, differ_l = outputs_once(rep["outputs"]["orders.ledger"])
    sent = events[: rep["sent"]]
    return not (
        differ_t
        or differ_l
        or check_totals(sent, totals)
        or check_windows(sent, ledger_windows(ledger), WINDOW_S)
        or check_ledger(sent, ledger, WINDOW_S)
    )


def run_fault(fault: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    stop = threading.Event()
    log: dict[str, Any] = {}
    events_file, events = None, None
    topology = args.topology
    if args.stateful:
        topology, events_file, events = stateful_setup(out / "stateful")
    res = demo.run(
        topology=topology,
        trace_name=args.trace,
        duration=args.duration,
        peak_rate=args.peak_rate,
        run_dir=out / fault.replace(":", "-"),
        live=False,
        drain_s=args.drain,
        compare_static=False,
        # the ingress service runs only where LAS admits there (``las.site``)
        extra_env={"SPS_ADMISSION": "ingress"} if fault == "kill:ingress" else None,
        during=lambda ens: inject(fault, ens, args.at, stop, log),
        events_file=events_file,
    )
    stop.set()
    rep = res["report"]
    td = float(res["stats"][0]["td"]) if res["stats"] else 1.0
    rec = recovery.recovery(recovery.intervals_from_stats(res["stats"]), td, log.get("at"))
    stages = rep.get("stages") or []
    return {
        "fault": fault,
        "sent": rep["sent"],
        "completed": rep.get("completed"),
        "shed": rep["shed"],
        "expired": rep["expired"],
        "dead_lettered": rep["dead_lettered"],
        "lost": rep["lost"],
        "lost_by_stage": {s["operator"]: s["lost"] for s in stages},
        "duplicates": rep.get("duplicates"),
        "malformed_sent": log.get("malformed"),
        "restarts": rep.get("restarts"),
        "fault_at": log.get("at"),
        "killed_workers": len(log.get("killed_pid") or []),
        "recovered_s": rec.recovered_s,
        "left_band": rec.left_band,
        "band": asdict(rec.band) if rec.band else None,
        "latency_ms_mean": rep.get("latency_ms_mean"),
        "state_exact": state_exact(rep, events) if events is not None else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--faults", default=",".join(DEFAULT_FAULTS))
    ap.add_argument("--topology", default="twitter_remote")
    ap.add_argument("--trace", default="short-spikes")
    ap.add_argument("--duration", type=float, default=40.0)
    ap.add_argument("--peak-rate", type=float, default=320.0)
    ap.add_argument("--at", type=float, default=15.0, help="seconds into the replay")
    ap.add_argument("--drain", type=float, default=150.0)
    ap.add_argument("--out", default=f"runs/faults-{time.strftime('%Y%m%d-%H%M%S')}")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--stateful", action="store_true", help="the orders pipeline (keyed, windowed)")
    ap.add_argument(
        "--standby",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="a warm standby dataplane takes over from a killed one (SPS_DATAPLANE_STANDBY)",
    )
    args = ap.parse_args()
    os.environ["SPS_DATAPLANE_STANDBY"] = "true" if args.standby else "false"
    out = Path(args.out)
    rows = []
    for fault in [f.strip() for f in args.faults.split(",") if f.strip()]:
        row = run_fault(fault, args, out)
        rows.append(row)
        if not args.json:
            print(json.dumps(row), flush=True)
    (out / "faults.json").write_text(json.dumps(rows, indent=1))
    if args.json:
        print(json.dumps(rows))
    lost = np.array([r["lost"] for r in rows])
    if not args.json:
        print(f"faults: {len(rows)}, lost in total: {int(lost.sum())}")


if __name__ == "__main__":
    main()
