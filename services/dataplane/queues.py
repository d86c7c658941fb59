"""What planning a micro-batch reads of the knowledge base (``BatchReads``), the queue
levels the driver publishes from it for the monitor (``publish_queues``), and the served
offsets the replicas report between their checkpoints for those levels
(``ServedReport``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("sps.dataplane")


@dataclass(frozen=True)
class BatchReads:
    """What planning a micro-batch reads: each operator's active count, how far each
    partition was processed (``replica.publish``) and, unless not asked for, its
    partition ends (the registry's, from the same round trip, or the broker's);
    ``stopping``: the driver is stopping gracefully (``stopping.py``); ``served``: how
    far the replicas have served since (``ServedReport``), for the queue levels only."""

    active: dict[str, int]
    progress: dict[str, dict[str, int]]
    ends: dict[str, list[int]]
    stopping: bool = False
    served: dict[str, dict[str, int]] = field(default_factory=dict)


def publish_queues(
    producer: Any, topic: str, td: float, reads: BatchReads, end: Mapping[str, Any]
) -> None:
    """Each operator's events not yet processed (beyond ``end``, Spark's offsets of the
    batch done, the replicas' checkpointed progress and what they reported served since)
    and active count, to the metrics ``topic``. Without the served offsets a level would
    count up to a checkpoint interval of events already processed, and Eq. 3 would size
    the pool for a backlog that is not there."""
    from elastic_sps.contracts.metrics import OperatorCounters

    interval = int(time.time() // td)
    for op, op_ends in reads.ends.items():
        done, progress, served = end.get(op, {}), reads.progress[op], reads.served.get(op, {})
        queued = 0
        for j, e in enumerate(op_ends):
            at = max(int(done.get(str(j), 0)), progress.get(str(j), 0), served.get(str(j), 0))
            queued += max(0, e - at)
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


# How often a serving replica reports its served offsets: a level is at most this stale,
# so it counts at most this long of the input as queued that is not (a Redis write each,
# between chunks, not per event).
SERVED_REPORT_S = 0.05


@dataclass
class ServedReport:
    """A replica's served offsets, per partition, reported every ``SERVED_REPORT_S``
    between its checkpoints. Best effort: a level a write missed is a report late. The
    first report of a replica overwrites what a replica before it served past, so a
    replay after a failure shows its backlog."""

    kb: Any  # KnowledgeBase
    operator: str
    last: float = float("-inf")

    def due(self, now: float) -> bool:
        return now - self.last >= SERVED_REPORT_S

    def report(self, served: Mapping[int, int], now: float) -> None:
        from redis.exceptions import RedisError

        self.last = now
        if not served:
            return
        try:
            self.kb.record_position(self.operator, served)
        except RedisError as exc:  # the server's fault; the next checkpoint says so
            log.debug("served offsets of %s not reported: %s", self.operator, exc)
