"""python -m services.ingress: sps.ingress -> LAS -> the entry operators' topics.

A plain confluent-kafka loop rather than a faust agent: the gate decides thousands of
events per call, and faust's per-event async path tops out far below the 20,000 events/s
this service must sustain.
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import redis
from confluent_kafka import Consumer, Producer

from services.ingress.core import Gate
from shared import topology
from shared.contracts.action import DeadLetter
from shared.contracts.metrics import OperatorCounters
from shared.embedded import free_port
from shared.grouping import LoadAwareRouter
from shared.kafka_admin import ensure_topics
from shared.knowledge_base import Keys
from shared.settings import IngressSettings, settings_or_exit
from shared.topics import Topics
from shared.tracked_producer import TrackedProducer


def serve_ops(port: int, state: dict[str, Any]) -> None:
    """/metrics and /health on a thread (prometheus_client's own server)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from prometheus_client import generate_latest

    class H(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/metrics"):
                body = generate_latest(state["registry"])
            elif self.path.startswith("/health"):
                import json

                body = json.dumps(
                    {"service": "ingress", "status": "ok", "counts": state["counts"]}
                ).encode()
            else:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    ThreadingHTTPServer((state["host"], port), H).serve_forever()


def main(settings: IngressSettings) -> None:
    from prometheus_client import CollectorRegistry, Counter, Gauge

    topo = topology.load(settings.topology)
    keys = Keys(settings.key_prefix)
    r = redis.Redis.from_url(settings.redis_url)
    ensure_topics(settings.kafka_bootstrap_servers, settings.topics.control())
    for op in topo.operators:
        ensure_topics(
            settings.kafka_bootstrap_servers, [Topics.operator(op.name)], partitions=op.max_replicas
        )
    gate = Gate(topo, r, keys, settings.tau_ms, settings.key_field, settings.las_horizon_s)
    registry = CollectorRegistry()
    counters = {
        n: Counter(f"sps_ingress_{n}", f"events {n}", registry=registry)
        for n in ("received", "admitted", "shed", "dead_lettered", "unkeyed")
    }
    counts = dict.fromkeys(counters, 0)
    reg = registry
    las_gauges = {
        "floor": Gauge("sps_ingress_las_floor_seconds", "learned batch wait", registry=reg),
        "multiplier": Gauge("sps_ingress_las_cost_multiplier", "learned ŵ scale", registry=reg),
        "wait": Gauge("sps_ingress_las_estimated_wait_seconds", "q̂ now", registry=reg),
        "infeasible": Gauge(
            "sps_ingress_las_tau_infeasible", "1: τ below the engine's floor", registry=reg
        ),
    }
    port = settings.web_port or free_port()
    threading.Thread(
        target=serve_ops,
        args=(port, {"registry": registry, "counts": counts, "host": settings.web_host}),
        daemon=True,
    ).start()
    print(f"ingress: metrics at http://127.0.0.1:{port}/metrics", flush=True)
    consumer = Consumer(
        {
            "bootstrap.servers": settings.kafka_bootstrap_servers,
            "group.id": "sps-ingress",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": int(settings.kafka_session_timeout_s * 1000),
        }
    )
    consumer.subscribe([settings.topics.ingress])
    out = TrackedProducer(settings.kafka_bootstrap_servers, r, keys)
    side = Producer(
        {
            "bootstrap.servers": settings.kafka_bootstrap_servers,
            "batch.num.messages": 1,
            "linger.ms": 0,
        }
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    entries = [e for e in topo.successors["source"]]
    routers: dict[str, LoadAwareRouter] = {}
    interval = {"k": int(time.time() // settings.td), "received": 0, "shed": 0, "unkeyed": 0}

    def refresh_routers() -> None:
        for e in entries:
            n = int(r.get(keys.active(e.dst)) or 1)
            n = max(1, min(topo[e.dst].max_replicas, n))
            util = r.hgetall(keys.utilisation(e.dst))
            us = [float(util.get(str(j).encode(), 0.0)) for j in range(n)]
            routers[e.dst] = LoadAwareRouter(topo[e.dst].et_s, settings.td, us)

    warned = {"infeasible": False}

    def publish_interval(now: float) -> None:
        k = int(now // settings.td)
        if k == interval["k"]:
            return
        if gate.las is not None:
            las = gate.las_state(now)
            if las["infeasible"] and not warned["infeasible"]:
                print(
                    f"ingress: warning: SPS_TAU_MS={settings.tau_ms:g} is below what this "
                    f"engine allows (every event waits ~{1000 * las['floor']:.0f} ms for its "
                    "micro-batch): shedding only the backlog beyond that wait",
                    flush=True,
                )
            warned["infeasible"] = bool(las["infeasible"])
            for name, g in las_gauges.items():
                g.set(las[name])
            print(
                f"ingress: interval {interval['k']} received {interval['received']} "
                f"shed {interval['shed']} LAS " + " ".join(f"{n}={v:.3f}" for n, v in las.items()),
                flush=True,
            )
        rec = OperatorCounters(
            interval=interval["k"],
            operator="source",
            processed=interval["received"],
            shed=interval["shed"],
            unkeyed=interval["unkeyed"],
        )
        side.produce(settings.topics.metrics, rec.model_dump_json().encode())
        side.poll(0)
        interval.update(k=k, received=0, shed=0, unkeyed=0)

    refresh_routers()
    last_refresh = time.monotonic()
    while not stop.is_set():
        msgs = consumer.consume(num_messages=settings.batch, timeout=0.2)
        now = time.time()
        publish_interval(now)
        if time.monotonic() - last_refresh > 0.5:
            refresh_routers()
            last_refresh = time.monotonic()
        gate.refresh()
        msgs = [m for m in msgs if m.error() is None]
        if not msgs:
            continue
        d = gate.decide([m.value() for m in msgs], now)
        for ev, key in d.admitted:
            for e in entries:
                out.produce(
                    Topics.operator(e.dst), ev.encode(), partition=routers[e.dst].choose(), key=key
                )
        for raw, reason in d.dead:
            rec = DeadLetter(
                service="ingress",
                topic=settings.topics.ingress,
                reason=reason,
                payload=raw[:2000].decode("utf-8", "replace"),
                at=now,
            )
            side.produce(settings.topics.deadletter, rec.model_dump_json().encode())
        if settings.write_shed:
            for raw in d.shed:
                side.produce(settings.topics.shed, raw)
        out.flush()
        side.flush(10)
        consumer.commit(asynchronous=False)  # only after everything is delivered
        n = len(msgs)
        interval["received"] += n
        interval["shed"] += len(d.shed)
        interval["unkeyed"] += d.unkeyed
        for name, v in (
            ("received", n),
            ("admitted", len(d.admitted)),
            ("shed", len(d.shed)),
            ("dead_lettered", len(d.dead)),
            ("unkeyed", d.unkeyed),
        ):
            counters[name].inc(v)
            counts[name] += v
        r.hset(f"{keys.prefix}:ingress:counts", mapping=dict(counts))  # type: ignore[arg-type]
    publish_interval(time.time() + settings.td)
    side.flush(10)
    consumer.close()


if __name__ == "__main__":
    main(settings_or_exit(IngressSettings))
