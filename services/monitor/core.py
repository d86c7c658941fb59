"""Monitor: per-operator counters of many replicas -> one statistics record per interval.

An interval closes as soon as the ingress's count of it arrives (the ingress publishes
interval t's arrivals only once t is over plus a 0.25 s grace, so λ_G(t) is complete, and
the dataplane's records of t, sent during t, are in), or its end plus a grace period has
passed. Waiting for the count of t+1 instead would put every plan one interval
later. An operator that sent nothing is reported ``silent``; a record for an
already closed interval is counted as late and folded into the next open one.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import numpy as np

from elastic_sps.contracts.metrics import OperatorCounters
from elastic_sps.contracts.stats import OperatorInterval, StatsRecord
from elastic_sps.model.topology import SOURCE, Topology


@dataclass
class _Acc:
    received_from: dict[str, float] = field(default_factory=dict)
    processed: float = 0.0
    emitted: float = 0.0
    emitted_to: dict[str, float] = field(default_factory=dict)
    queued_by_replica: dict[int, float] = field(default_factory=dict)
    busy_s: float = 0.0
    dead_lettered: float = 0.0
    expired: float = 0.0
    active: int = 0
    seen: bool = False


@dataclass
class _Interval:
    ops: dict[str, _Acc]
    input_events: float = 0.0
    shed: float = 0.0
    latencies: list[float] = field(default_factory=list)
    latency_sum: float = 0.0
    latency_n: int = 0
    queuing_sum: float = 0.0
    queuing_n: int = 0
    late: int = 0


class IntervalAggregator:
    def __init__(self, topology: Topology, td: float) -> None:
        self.topology = topology
        self.td = td
        self.open: dict[int, _Interval] = {}
        self.next_to_close: int | None = None
        self.max_seen = -1
        self.max_source_seen = -1
        # A silent operator still has its replicas: carry the last reported count forward.
        self.last_active = {op.name: max(1, op.min_replicas) for op in topology.operators}
        # ... and its queues: a queue is a level, reported with a replica's micro-batch.
        # A batch longer than td leaves intervals with no report; counting them as an
        # empty queue makes PA-SPS's Eq. 2 swing between a large and a small pool every
        # other interval (seen live; docs/measurements.md).
        self.last_queued: dict[str, dict[int, float]] = {n: {} for n in topology.names}
        self.late_total = 0
        self.unknown_operator = 0

    def _interval(self, k: int) -> _Interval:
        if k not in self.open:
            self.open[k] = _Interval({n: _Acc() for n in self.topology.names})
        return self.open[k]

    def add(self, rec: OperatorCounters) -> bool:
        """Fold one record in; False when it names an operator the topology lacks."""
        if rec.operator != SOURCE and rec.operator not in self.topology.names:
            self.unknown_operator += 1
            return False
        k = rec.interval
        if self.next_to_close is None:
            self.next_to_close = k
        late = k < self.next_to_close
        if late:
            k = self.next_to_close
            self.late_total += 1
        iv = self._interval(k)
        iv.late += int(late)
        self.max_seen = max(self.max_seen, k)
        if rec.operator == SOURCE:
            # the record's own interval: a late count (folded into the open interval)
            # must not close that interval before it ends
            self.max_source_seen = max(self.max_source_seen, rec.interval)
            iv.input_events += rec.processed
            iv.shed += rec.shed
            return True
        acc = iv.ops[rec.operator]
        for src, n in rec.received_from.items():
            acc.received_from[src] = acc.received_from.get(src, 0.0) + n
        acc.processed += rec.processed
        acc.emitted += rec.emitted
        for dst, n in rec.emitted_to.items():
            acc.emitted_to[dst] = acc.emitted_to.get(dst, 0.0) + n
        if rec.queued is not None:  # a queue is a level, not a flow: keep the latest
            acc.queued_by_replica[rec.replica] = rec.queued
        acc.busy_s += rec.busy_s
        acc.dead_lettered += rec.dead_lettered + rec.members_dead_lettered
        acc.expired += rec.expired
        acc.active = max(acc.active, rec.active_replicas)
        acc.seen = True
        iv.latencies.extend(rec.latency_ms)
        # the exact mean from the sums; the samples are for the quantiles
        iv.latency_sum += rec.latency_ms_sum
        iv.latency_n += rec.latency_n
        iv.queuing_sum += rec.queuing_ms_sum
        iv.queuing_n += rec.queuing_n
        return True

    def due(self, now: float | None = None, grace_s: float = 0.5) -> list[int]:
        """Intervals that may close: up to the ingress's newest count, or past end + grace."""
        if self.next_to_close is None:
            return []
        now = time.time() if now is None else now
        wall = math.floor((now - grace_s) / self.td) - 1  # last interval fully past
        # Cap the catch-up so a far-off record cannot make us emit millions of intervals.
        last = min(max(self.max_source_seen, wall), self.next_to_close + 1000)
        return list(range(self.next_to_close, last + 1))

    def _queue_level(self, name: str, reported: dict[int, float]) -> float:
        """The operator's queue at the interval's end: each replica's latest report, this
        interval's or carried from an earlier one. A carried level of a replica beyond
        the active count is dropped (an inactive slot reports while it drains)."""
        active = self.last_active[name]
        carried = {r: q for r, q in self.last_queued[name].items() if r < active}
        level = carried | reported
        self.last_queued[name] = level
        return sum(level.values())

    def close(self, k: int, now: float | None = None) -> StatsRecord:
        assert self.next_to_close is not None and k == self.next_to_close
        iv = self.open.pop(k, None) or _Interval({n: _Acc() for n in self.topology.names})
        self.next_to_close = k + 1
        ops = {}
        for name, a in iv.ops.items():
            if a.active:
                self.last_active[name] = a.active
            queued = self._queue_level(name, a.queued_by_replica)
            ops[name] = OperatorInterval(
                received=sum(a.received_from.values()),
                received_from=a.received_from,
                processed=a.processed,
                emitted=a.emitted,
                emitted_to=a.emitted_to,
                queued=queued,
                busy_s=a.busy_s,
                et_ms=1000.0 * a.busy_s / a.processed if a.processed > 0 else 0.0,
                expired=a.expired,
                active_replicas=a.active or self.last_active[name],
                silent=not a.seen,
            )
        lat = np.asarray(iv.latencies)
        return StatsRecord(
            interval=k,
            td=self.td,
            input_events=iv.input_events,
            operators=ops,
            latency_ms_mean=iv.latency_sum / iv.latency_n if iv.latency_n else None,
            latency_ms_p99=float(np.percentile(lat, 99)) if len(lat) else None,
            queuing_ms_mean=iv.queuing_sum / iv.queuing_n if iv.queuing_n else None,
            shed_events=iv.shed,
            late_records=iv.late,
            closed_at=time.time() if now is None else now,
        )


class Closer:
    """Closes the due intervals in order, each once, however many coroutines ask.

    The monitor asks on every record and on a timer; sending a closed interval awaits
    the producer, and a second ``flush`` that ran meanwhile computed the same due list
    and closed those intervals first: the first one then closes an interval that is no
    longer next, and the monitor crashes. One lock around the whole
    close-and-send keeps each interval's record sent once and in order."""

    def __init__(
        self, agg: IntervalAggregator, send: Callable[[StatsRecord], Awaitable[None]]
    ) -> None:
        self.agg, self.send = agg, send
        self._lock = asyncio.Lock()

    async def flush(self, grace_s: float, now: float | None = None) -> None:
        async with self._lock:
            for k in self.agg.due(now, grace_s=grace_s):
                await self.send(self.agg.close(k, now))
