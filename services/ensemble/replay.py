"""Replay a trace into sps.ingress: the application's sample events at the trace's rate,
each with a unique id and its send timestamp."""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from confluent_kafka import Producer

from elastic_sps.io.connections import kafka_config
from elastic_sps.model.topology import Topology
from elastic_sps.model.traces import Trace
from elastic_sps.pipeline.samples import record_bytes, sample_payloads


class EventsTooShort(ValueError):
    """The events file ends before the run does, and its records name their own ids."""


def ids_from_field(topo: Topology) -> bool:
    return topo.source.id.startswith("field:")


def sample_events(
    topo: Topology,
    events_file: str | Path | None = None,
    seed: int = 0,
    cycle: bool | None = None,
    needed: int | None = None,
) -> Iterator[bytes]:
    """Records as a user's producer would write them to the source topic
    (``elastic_sps.pipeline.samples``), one sequence for the whole run; keyed counters when
    the topology names no samples. ``cycle``: start the records again when they run out;
    by default only when ids do not come from a field (a record replayed with its own id
    is a duplicate of the first, not a new event). Without cycling, ``needed`` records
    more than the file holds is an error (``EventsTooShort``) before anything is sent."""
    fmt = topo.source.format
    payloads = sample_payloads(topo, events_file, seed)
    if payloads is None:
        return (record_bytes({"key": f"k{k % 4096}", "value": k}, fmt) for k in itertools.count())
    records = [record_bytes(p, fmt) for p in payloads]
    if cycle is None:
        cycle = not ids_from_field(topo)
    if cycle:
        return itertools.cycle(records)
    if needed is not None and needed > len(records):
        where = events_file or topo.source.sample_events or topo.source.generator
        raise EventsTooShort(
            f"{where}: {len(records):,} events, the run sends {needed:,}; ids come from "
            f"{topo.source.id!r}, so replaying the file again would repeat them: give a "
            "longer file, a shorter or slower run, or --cycle (the report then says ids repeat)"
        )
    return iter(records)


def events_needed(*ticks: np.ndarray) -> int:
    """The most records playing ``ticks`` one after the other can send."""
    return int(sum(math.ceil(float(np.sum(t))) for t in ticks))


def played(trace: Trace, speedup: float, peak_eps: float | None) -> np.ndarray:
    """Events per 100 ms tick when the trace plays ``speedup`` times faster, rescaled so the
    played peak is ``peak_eps`` if given."""
    if speedup <= 0:
        raise ValueError(f"--speedup must be positive, got {speedup}")
    per_tick = trace.per_interval(0.1 * speedup)
    if peak_eps is not None and per_tick.max() > 0:
        per_tick = per_tick * (peak_eps * 0.1 / per_tick.max())
    return per_tick


WARMUP_S = 10.0


def warmup_ticks(seconds: float, peak_eps: float) -> np.ndarray:
    """Events per 100 ms tick of the warm-up: at least a second, at a quarter of
    ``peak_eps`` (the demo passes the lower of its peak and the default peak, so an
    overload run does not overload its warm-up).

    The Python workers' first micro-batches take seconds, and early in a run Spark's driver
    JVM has bursts of CPU (its JIT warming up, we believe) that lengthen the batches: a
    short warm-up warms the workers only, and the trace's first spike then has about twice
    the latency of a later, alike one (figures: docs/measurements.md). The warm-up's events
    are counted and accounted for like the replay's; latency, resources and rescales are
    taken over the replay's own intervals (``report.build``)."""
    ticks = max(10, round(seconds * 10))
    return np.full(ticks, max(5.0, 0.25 * peak_eps * 0.1))


def replay(
    bootstrap: str,
    topic: str,
    topo: Topology,
    ticks: np.ndarray,
    stop: threading.Event | None = None,
    seed: int = 0,
    sent_by_interval: dict[int, int] | None = None,
    td: float = 1.0,
    events_file: str | Path | None = None,
    events: Iterator[bytes] | None = None,
) -> int:
    """Play ``ticks`` (events per 100 ms) into ``topic`` as plain records (the source's
    format; the ingress gives each its id, by default topic/partition/offset); each
    record's Kafka timestamp is its tick's send time, which the ingress counts λ_G(t) and
    latency by. ``sent_by_interval``, if given, receives the events sent per interval of
    ``td`` seconds (the ground truth). ``events``: the records to send, shared by the
    replays of one run (default: the topology's, from the start)."""
    # idempotent: a batch retried on a new topic's first produce never lands behind later ones
    producer = Producer(kafka_config(bootstrap, **{"linger.ms": 10, "enable.idempotence": True}))
    if events is None:
        events = sample_events(topo, events_file, seed)
    sent = 0
    owed = 0.0
    start = time.monotonic()
    for k, n in enumerate(ticks):
        if stop is not None and stop.is_set():
            break
        owed += float(n)
        whole = int(owed)
        owed -= whole
        stamp = int(time.time() * 1000)
        batch = list(itertools.islice(events, whole))  # fewer: an uncycled file ended
        for record in batch:
            while True:
                try:
                    producer.produce(topic, record, timestamp=stamp)
                    break
                except BufferError:
                    producer.poll(0.05)
        sent += len(batch)
        if sent_by_interval is not None and batch:
            k_iv = int(stamp / 1000 // td)
            sent_by_interval[k_iv] = sent_by_interval.get(k_iv, 0) + len(batch)
        producer.poll(0)
        delay = start + (k + 1) * 0.1 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    if producer.flush(30):
        raise RuntimeError("replay: events not delivered within 30 s")
    return sent
