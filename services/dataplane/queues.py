"""What planning a micro-batch reads of the knowledge base (``BatchReads``), and the
queue levels the driver publishes from it for the monitor (``publish_queues``)."""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BatchReads:
    """What planning a micro-batch reads: each operator's active count, how far each
    partition was processed (``replica.publish``) and, unless not asked for, its
    partition ends (the registry's, from the same round trip, or the broker's);
    ``stopping``: the driver is stopping gracefully (``stopping.py``)."""

    active: dict[str, int]
    progress: dict[str, dict[str, int]]
    ends: dict[str, list[int]]
    stopping: bool = False


def publish_queues(
    producer: Any, topic: str, td: float, reads: BatchReads, end: Mapping[str, Any]
) -> None:
    """Each operator's events not yet processed (beyond ``end``, Spark's offsets of the
    batch done, and the replicas' checkpointed progress) and active count, to the
    metrics ``topic``."""
    from elastic_sps.contracts.metrics import OperatorCounters

    interval = int(time.time() // td)
    for op, op_ends in reads.ends.items():
        done, progress = end.get(op, {}), reads.progress[op]
        queued = sum(
            max(0, e - max(int(done.get(str(j), 0)), progress.get(str(j), 0)))
            for j, e in enumerate(op_ends)
        )
        rec = OperatorCounters(
            interval=interval,
            operator=op,
            replica=0,
            queued=queued,
            active_replicas=reads.active[op],
        )
        producer.produce(topic, value=rec.model_dump_json().encode())
    producer.flush(10)


def list_source_ends(r: Any, keys: Any, reads: BatchReads, admitting: Collection[str]) -> None:
    """The entry step's source ends, where the registry keeps an operator's: the
    services that read a backlog from it (the LAS gate's bound, the drain, the
    dataplane's /metrics) find the entry operator's there (its producers keep none)."""
    for op in admitting:
        if op in reads.ends:
            r.hset(keys.ends(keys.topic(op)), mapping=dict(enumerate(reads.ends[op])))
