"""One replica's work for one micro-batch (runs in a Spark Python worker).

Clients are cached per worker process (Spark reuses Python workers), so a replica does
not reconnect to Kafka and Redis every micro-batch; so is each entry operator's LAS
sketch state, which must outlive a batch to become stable.
"""

from __future__ import annotations

import time
import zlib
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from services.dataplane.apps import Context, operator_fn
from services.dataplane.envelope import BadEvent, Envelope, decode
from services.dataplane.offsets import TrackedProducer
from services.dataplane.sample import LatencySample
from shared.contracts.action import DeadLetter
from shared.contracts.metrics import OperatorCounters
from shared.grouping import LoadAwareRouter
from shared.knowledge_base import Keys
from shared.topics import Topics

_CACHE: dict[Any, Any] = {}


def _cached(key: Any, make: Any) -> Any:
    if key not in _CACHE:
        _CACHE[key] = make()
    return _CACHE[key]


def _spin(seconds: float) -> None:
    """Synthetic cost: burn CPU like a real operator would (sleep would free the core)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def run_replica(
    o: dict[str, str], operator: str, replica: int, start: int, end: int, active: int
) -> tuple[int, int, int, int, int, int, float]:
    import redis as redis_lib

    from shared import topology

    topo = _cached(("topo", o["topology"]), lambda: topology.load(o["topology"]))
    r = _cached(("redis", o["redis_url"]), lambda: redis_lib.Redis.from_url(o["redis_url"]))
    keys = Keys(o.get("prefix", "sps"))
    td = float(o.get("td", "1"))
    metrics_topic = o.get("metrics_topic", "sps.metrics")
    deadletter_topic = o.get("deadletter_topic", "sps.deadletter")
    producer: TrackedProducer = _cached(
        ("producer", o["bootstrap"], o["redis_url"], keys.prefix),
        lambda: TrackedProducer(o["bootstrap"], r, keys),
    )
    op = topo[operator]
    fn = operator_fn(topo, operator)
    cost = op.et_s if o.get("synthetic_cost") == "1" else 0.0
    successors = [e.dst for e in topo.successors[operator]]
    routers = {}
    for s in successors:
        n = int(r.get(keys.active(s)) or max(1, topo[s].min_replicas))
        n = max(1, min(topo[s].max_replicas, n))
        util = r.hgetall(keys.utilisation(s))
        us = [float(util.get(str(j).encode(), 0.0)) for j in range(n)]
        routers[s] = LoadAwareRouter(topo[s].et_s, td, us)
    ctx = Context(operator, r, keys.prefix)
    is_sink = not successors
    track_ids = o.get("track_sink_ids") == "1"
    las = None
    if operator in topo.entry_operators and o.get("las", "1") == "1":
        las = _cached(
            ("las", operator, replica, keys.prefix), lambda: _las_operator(r, operator, keys)
        )

    received_from: dict[str, float] = {}
    processed = emitted = dead = 0
    busy = 0.0
    latencies = LatencySample(200)
    queuing = LatencySample(500)
    las_keys: list[int] = []
    las_times: list[float] = []
    sink_ids: list[str] = []
    if end > start:
        consumer: Consumer = _cached(
            ("consumer", o["bootstrap"]),
            lambda: Consumer(
                {
                    "bootstrap.servers": o["bootstrap"],
                    "group.id": "sps-dataplane",
                    "enable.auto.commit": False,
                    "enable.partition.eof": False,
                    "fetch.wait.max.ms": 50,
                }
            ),
        )
        topic = Topics.operator(operator)
        consumer.assign([TopicPartition(topic, replica, start)])
        offset = start
        deadline = time.monotonic() + 60
        while offset < end:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{operator}[{replica}]: offsets {offset}..{end} not readable")
            for msg in consumer.consume(num_messages=min(2000, end - offset), timeout=0.5):
                err = msg.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(f"{operator}[{replica}]: {err}")
                    continue
                at = msg.offset() or 0
                if at < offset or at >= end:
                    continue
                offset = at + 1
                t0 = time.perf_counter()
                started = time.time()
                try:
                    ev = decode(msg.value())
                    ctx.event_id = ev.id
                    outputs = [
                        (dst, ev.forward(operator, payload).encode())
                        for dst, payload in fn(ev.payload, ctx)
                    ]
                except (BadEvent, KeyError, TypeError, ValueError) as exc:
                    dead += 1
                    _dead_letter(producer, deadletter_topic, operator, topic, replica, msg, exc)
                    continue
                if cost:
                    _spin(cost - (time.perf_counter() - t0))
                elapsed = time.perf_counter() - t0
                busy += elapsed
                processed += 1
                if ev.lasc is not None:  # a LAS probe: answer Δ, naming the probe
                    r.rpush(keys.las_deltas(operator), f"{ev.id} {time.time() - ev.lasc!r}")
                if ev.adm is not None:
                    queuing.add(1000.0 * (started - ev.adm))
                received_from[ev.src] = received_from.get(ev.src, 0.0) + 1
                if las is not None and isinstance(ev.payload, dict | str):
                    las_keys.append(_las_key(msg.key(), ev))
                    las_times.append(elapsed)
                for dst, body in outputs:
                    targets = [dst] if dst is not None else successors
                    for s in targets:
                        part = routers[s].choose()
                        producer.produce(Topics.operator(s), body, partition=part, key=msg.key())
                        emitted += 1
                if is_sink:
                    latencies.add(1000.0 * (time.time() - ev.ts))
                    if track_ids:
                        sink_ids.append(ev.id)
        consumer.unassign()
    producer.flush()
    if sink_ids:
        r.sadd(f"{keys.prefix}:sink:ids", *sink_ids)
    if las is not None and las_keys:
        import numpy as np

        las.update_batch(np.asarray(las_keys, dtype=np.int64), np.asarray(las_times))
    r.hset(keys.utilisation(operator), str(replica), min(1.0, processed * op.et_s / td))
    rec = OperatorCounters(
        interval=int(time.time() // td),
        operator=operator,
        replica=replica,
        received_from=received_from,
        processed=processed,
        emitted=emitted,
        busy_s=busy,
        dead_lettered=dead,
        active_replicas=active,
        latency_ms=latencies.values,
        queuing_ms=queuing.values,
        latency_ms_sum=latencies.total,
        latency_n=latencies.n,
        queuing_ms_sum=queuing.total,
        queuing_n=queuing.n,
    )
    producer.produce(metrics_topic, rec.model_dump_json().encode(), partition=0)
    producer.p.flush(10)
    return (replica, start, end, processed, emitted, dead, busy)


def _las_key(key: bytes | None, ev: Envelope) -> int:
    """The attribute the LAS sketches key on: the record key the ingress set."""
    return zlib.crc32(key if key else ev.id.encode()) % ((1 << 31) - 1)


def _las_operator(r: Any, operator: str, keys: Keys) -> Any:
    from shared.las.operator_side import LasOperator
    from shared.las.redis_store import SketchPublisher

    pub = SketchPublisher(r, operator, keys)
    return LasOperator(pub.publish_sketch, pub.send_delta, seed=zlib.crc32(operator.encode()))


def _dead_letter(
    producer: TrackedProducer,
    topic: str,
    operator: str,
    src_topic: str,
    replica: int,
    msg: Any,
    exc: Exception,
) -> None:
    raw = msg.value() or b""
    rec = DeadLetter(
        service=f"dataplane:{operator}",
        topic=src_topic,
        partition=replica,
        offset=msg.offset(),
        reason=str(exc) or type(exc).__name__,
        payload=raw[:2000].decode("utf-8", "replace"),
        at=time.time(),
    )
    producer.produce(topic, rec.model_dump_json().encode(), partition=0)
