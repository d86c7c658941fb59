"""One operator of the Twitter pipeline as the plain confluent-kafka loop a user would
write: consume a batch, apply the operator function, produce its outputs to the next
topic (the same partition), run the sink's Redis writes as one pipeline, and commit the
batch once its outputs are delivered. Run by ``benchmarks/bench_peers.py``.

Each record's value is the payload with ``_meta`` (the event's id) beside it, carried
around the user's function, which never sees it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import signal
from types import SimpleNamespace
from typing import Any

import redis
from confluent_kafka import Consumer, Producer


def resolve(code: str) -> Any:
    module, _, name = code.partition(":")
    return getattr(importlib.import_module(module), name)


def take_ready(consumer: Consumer, n: int, wait_s: float) -> list[Any]:
    """What the consumer holds (up to ``n``), else the first record within ``wait_s`` and
    what came with it: ``consume(n, timeout)`` alone waits its whole timeout at a trickle.
    The same as the dataplane's ``elastic_sps.io.kafka_io.take_ready`` (this script runs in
    the peers' own venv, without the project)."""
    msgs = consumer.consume(n, 0)
    if msgs:
        return msgs
    first = consumer.poll(wait_s)
    return [] if first is None else [first, *consumer.consume(n - 1, 0)]


def main() -> None:
    ap = argparse.ArgumentParser()
    for flag in ("--bootstrap", "--redis", "--code", "--src", "--dst", "--group", "--prefix"):
        ap.add_argument(flag, required=True)
    ap.add_argument("--batch", type=int, default=500)
    args = ap.parse_args()
    fn = resolve(args.code)
    r = redis.Redis.from_url(args.redis)
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    producer = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 5})
    consumer.subscribe([args.src])
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    while not stop:
        batch = take_ready(consumer, args.batch, 0.05)
        if not batch:
            continue
        ctx = SimpleNamespace(writes=r.pipeline(transaction=False), prefix=args.prefix)
        for m in batch:
            if m.error():
                continue
            value = json.loads(m.value())
            meta = value.pop("_meta")
            for _, out in fn(value, ctx):
                body = json.dumps({**out, "_meta": meta}).encode()
                producer.produce(args.dst, body, partition=m.partition())
        ctx.writes.execute()
        producer.flush()
        consumer.commit(asynchronous=False)
    consumer.close()


if __name__ == "__main__":
    main()
