"""What a dataplane output costs to hand to the Kafka client: ``TrackedProducer.produce``
per record (a librdkafka enqueue and delivery callback each) against ``stage`` then one
``send`` per chunk (``produce_batch`` per topic and partition), on an embedded broker and
redis-server. Per record: the calling thread's CPU and the whole process's (librdkafka's
threads included), up to the flush that delivers them. Machine-dependent: a benchmark,
not a test.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_produce.py [--records 200000]
     [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid

import redis

from elastic_sps.io.embedded import kafka_broker, redis_server
from elastic_sps.io.kafka_admin import ensure_topics
from elastic_sps.io.knowledge_base import Keys
from elastic_sps.io.tracked_producer import TrackedProducer

PARTITIONS = 4
CHUNK = 500  # records a replica takes from its feed at once (``replica.CHUNK``)
# an envelope as a Nexmark bid crosses a hop in (about 190 bytes)
VALUE = (
    b'{"id":"nx/0/123456","ts":1795894341.88,"src":"bids","payload":{"auction":1001,'
    b'"bidder":2002,"price":12345,"channel":"Google","dateTime":1795894341882,'
    b'"extra":"xxxxxxxxxxxxxxxx"},"evt":1795894341.882}'
)


def per_record(tracked: TrackedProducer, topic: str, records: int, staged: bool) -> dict:
    """Microseconds of CPU per record, the caller's and the process's, up to delivery."""
    thread0, process0 = time.thread_time(), time.process_time()
    for i in range(records):
        if staged:
            tracked.stage(topic, VALUE, i % PARTITIONS)
            if i % CHUNK == CHUNK - 1:
                tracked.send()
        else:
            tracked.produce(topic, VALUE, i % PARTITIONS)
    caller = time.thread_time() - thread0
    tracked.flush()
    process = time.process_time() - process0
    return {"caller_us": 1e6 * caller / records, "process_us": 1e6 * process / records}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows: dict[str, list[dict]] = {"produce": [], "stage": []}
    with kafka_broker() as bootstrap, redis_server() as url:
        keys = Keys("bp" + uuid.uuid4().hex[:6])
        r = redis.Redis.from_url(url)
        for k in range(args.rounds):  # alternating, each on a topic of its own
            for way in ("produce", "stage"):
                topic = keys.topic(f"{way}{k}")
                ensure_topics(bootstrap, [topic], partitions=PARTITIONS)
                tracked = TrackedProducer(bootstrap, r, keys)
                tracked.produce(topic, b"warm", 0)
                tracked.flush()
                rows[way].append(per_record(tracked, topic, args.records, way == "stage"))
    out = {
        way: {m: round(statistics.median(x[m] for x in runs), 2) for m in runs[0]} | {"runs": runs}
        for way, runs in rows.items()
    }
    if args.json:
        print(json.dumps(out))
        return
    for way, row in out.items():
        print(f"{way}: caller {row['caller_us']} µs, process {row['process_us']} µs per record")


if __name__ == "__main__":
    main()
