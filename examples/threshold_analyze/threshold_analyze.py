"""A third-party analyze service: target-utilisation scaling, as Kubernetes' HPA does it.

It shows what swapping a service takes. It imports nothing from elastic-sps: it reads
the ``sps.stats`` records and writes ``sps.analysis`` records as the README's topic
table defines them (plain JSON), takes its settings from the same ``SPS_*`` variables,
and serves ``/health`` and ``/metrics`` on ``SPS_WEB_PORT`` (the supervisor and compose
wait on ``/health``). The built-in plan and execute services apply what it asks.

    desired = ceil(active × utilisation / target), at least THRESHOLD_MIN_REPLICAS

    elastic-sps up --replace analyze='python examples/threshold_analyze/threshold_analyze.py'
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import sys
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from prometheus_client import CollectorRegistry, Counter, start_http_server

log = logging.getLogger("threshold_analyze")


def desired_replicas(op: dict[str, Any], td: float, target: float, floor: int) -> int:
    """The operator's replicas for a utilisation of ``target``: busy seconds over the
    seconds its active replicas had; a queue counts as work still to do."""
    active = max(1, int(op.get("active_replicas") or 1))
    processed = float(op.get("processed") or 0)
    busy = float(op.get("busy_s") or 0)
    backlog_s = float(op.get("queued") or 0) * (busy / processed if processed else 0)
    utilisation = (busy + backlog_s) / (active * td)
    # exactly on target stays put: ceil(2.0000000000000004) would add a replica
    return max(floor, math.ceil(active * utilisation / target - 1e-9))


def analysis(stats: dict[str, Any], target: float, floor: int) -> dict[str, Any]:
    td = float(stats["td"])
    return {
        "schema_name": "sps.analysis",
        "version": 1,
        "interval": stats["interval"],
        "td": td,
        "policy": "threshold",
        "predicted_input": stats["input_events"],  # no forecast: the last interval
        "observed_input": stats["input_events"],
        "operators": {
            name: {
                "replicas": desired_replicas(op, td, target, floor),
                "predicted_load": float(op.get("received") or 0),
                "current": int(op.get("active_replicas") or 0),
            }
            for name, op in stats["operators"].items()
        },
        "closed_at": stats["closed_at"],
    }


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    env = os.environ
    bootstrap = env.get("SPS_KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    stats_topic = env.get("SPS_TOPICS__STATS", "sps.stats")
    analysis_topic = env.get("SPS_TOPICS__ANALYSIS", "sps.analysis")
    target = float(env.get("THRESHOLD_TARGET", "0.7"))
    floor = int(env.get("THRESHOLD_MIN_REPLICAS", "1"))

    registry = CollectorRegistry()
    decisions = Counter("threshold_decisions", "analysis records sent", registry=registry)
    skipped = Counter("threshold_skipped", "records that were not sps.stats", registry=registry)
    # prometheus_client's server answers every path: /metrics, and /health with a 200
    start_http_server(
        int(env.get("SPS_WEB_PORT", "8000")), env.get("SPS_WEB_HOST", "127.0.0.1"), registry
    )
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "threshold-analyze",
            "auto.offset.reset": "latest",
        }
    )
    producer = Producer({"bootstrap.servers": bootstrap})
    consumer.subscribe([stats_topic])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    log.info("target utilisation %.2f, at least %d replicas", target, floor)
    try:
        while True:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            try:
                stats = json.loads(msg.value())
                assert stats.get("schema_name") == "sps.stats"
            except (ValueError, AssertionError):
                skipped.inc()  # not ours to judge: the built-in services dead-letter it
                continue
            producer.produce(analysis_topic, json.dumps(analysis(stats, target, floor)).encode())
            producer.poll(0)
            decisions.inc()
    finally:
        producer.flush(5)
        consumer.close()


if __name__ == "__main__":
    main()
