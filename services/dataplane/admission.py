"""The entry operator's first step with ``admission: entry``: its replicas read the
source's partitions themselves (no ingress service, no second Kafka hop per event) and
admit each record as the ingress would (``elastic_sps.las.gate``): decoded with the
source's format (undecodable: dead-lettered with the reason), LAS deciding per chunk,
λ_G counted by arrival interval (``elastic_sps.io.arrivals``), and each source
partition's watermark declared by the one slot that reads it, idle only once its reader
has sat at the partition's end for ``idle_s`` (Kafka Streams' rule: lag > 0 is never
idle).

A woken partition wakes the other idle partitions of its task, as the ingress's
``SourceDeclarations.resumed`` does for all of them: each is declared active again at
its last watermark before the first new event leaves, and waits another ``idle_s`` at its
end, so one about to deliver is not passed. Partitions served by other tasks (a CPU-bound
entry operator spread over processes) are not woken with it.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from elastic_sps.contracts.action import DeadLetter
from elastic_sps.contracts.metrics import OperatorCounters
from elastic_sps.io.arrivals import ArrivalCounts, arrival_s
from elastic_sps.io.envelope import Envelope
from elastic_sps.io.knowledge_base import Keys
from elastic_sps.io.watermarks import Declaration, SourceClock
from elastic_sps.las.gate import Gate
from elastic_sps.las.site import entry_step_refusal
from elastic_sps.model.keyed import owner
from elastic_sps.model.records import BadRecord, SourceSpec
from elastic_sps.model.topology import Topology

PUBLISH_EVERY_S = 0.05  # how often a worker's arrival counts and totals leave
TOTALS = ("received", "admitted", "shed", "dead_lettered", "unkeyed")


class AdmissionCounts:
    """One worker's arrivals per interval (λ_G: ``source`` rows on the metrics topic,
    which the monitor sums across workers) and admission totals (added to the run's
    ingress counts), sent by a thread of their own: an interval leaves once it is over
    and read (``ArrivalCounts.due``), whatever the replicas are waiting on."""

    def __init__(
        self, producer: Any, redis: Any, keys: Keys, metrics_topic: str, td: float, grace_s: float
    ) -> None:
        self.producer, self.r, self.keys, self.topic = producer, redis, keys, metrics_topic
        self.lock = threading.Lock()
        self.arrivals = ArrivalCounts(td, grace_s=grace_s)
        self.totals: dict[str, int] = {}
        threading.Thread(target=self._run, name="sps-arrivals", daemon=True).start()

    def received(self, msgs: Iterable[Any], began: float, caught_up: bool) -> None:
        """Records read by a read that began at ``began`` (epoch s); ``caught_up``: it left
        nothing waiting."""
        now = time.time()
        with self.lock:
            n = 0
            for m in msgs:
                self.arrivals.add(arrival_s(m, now), "received")
                n += 1
            if n:
                self.totals["received"] = self.totals.get("received", 0) + n
            if caught_up:
                self.arrivals.caught_up(began)

    def decided(self, counts: dict[str, int]) -> None:
        """A chunk's shed and unkeyed events, under the interval they were decided in
        (their totals leave with the slot's progress: ``publishing.publish``)."""
        now = time.time()
        with self.lock:
            for name in ("shed", "unkeyed"):
                if counts.get(name):
                    self.arrivals.add(now, name, counts[name])

    def publish(self, now: float) -> None:
        with self.lock:
            due, totals = self.arrivals.due(now), self.totals
            self.totals = {}
        try:
            while due:
                k, counts = due[0]
                rec = OperatorCounters.arrivals(k, counts)
                self.producer.produce(self.topic, rec.model_dump_json().encode(), partition=0)
                due.pop(0)
            if totals:
                self.r.hincrby(self.keys.ingress_counts, "received", totals["received"])
                totals = {}
        finally:  # what a failed send left goes with the next
            with self.lock:
                for k, counts in due:
                    for name, n in counts.items():
                        self.arrivals.open[k][name] = self.arrivals.open[k].get(name, 0) + n
                for name, n in totals.items():
                    self.totals[name] = self.totals.get(name, 0) + n

    def _run(self) -> None:
        from redis.exceptions import RedisError

        while True:
            time.sleep(PUBLISH_EVERY_S)
            try:
                self.publish(time.time())
            except (RedisError, BufferError):  # the servers: tried again next time
                continue


@dataclass
class WakeBoard:
    """A task's entry partitions' idle declarations (what each last sent, idle), and a
    count of wake-ups each partition's slot compares with the one it last saw."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    seq: int = 0
    idle: dict[int, Declaration] = field(default_factory=dict)

    def wake(self, producer: Any, targets: list[tuple[str, int]], woken_by: int) -> None:
        """``woken_by`` reads again: every other idle partition declared active at its last
        watermark (the caller holds ``lock``; the partitions are at their end, so no
        event of theirs is overtaken)."""
        for part, d in self.idle.items():
            if part == woken_by:
                continue
            body = replace(d, idle=False).encode()
            for topic, partition in targets:
                producer.produce(topic, body, partition=partition)
        self.idle.clear()
        self.seq += 1


@dataclass
class Admitted:
    """A chunk's admitted events by offset (with their LAS keys), and what it saw."""

    events: dict[int, tuple[Envelope, bytes | None]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)


class EntryGate:
    """One worker's LAS gate for the entry operator (its sketch state and calibration
    outlive a task), used by the worker's replica threads in turn."""

    def __init__(self, topo: Topology, redis: Any, keys: Keys, settings: Any) -> None:
        self.spec = topo.source.keyed_by(settings.key_field)
        self.lock = threading.Lock()
        self.local: Callable[[int], int] = lambda active: active
        # its probes are answered by its worker's slots, on its worker's list: gates of
        # other workers must not take them
        self.deltas_key = (
            f"{keys.las_deltas(topo.entry_operators[0])}:{socket.gethostname()}:{os.getpid()}"
        )
        self.gate = Gate.configured(
            topo, redis, keys, settings, lambda n: self.local(n), self.deltas_key
        )

    def serve(self, partitions: Iterable[int], of: int) -> None:
        """This worker's task serves ``partitions`` of ``of``: its share of the active
        replicas is their owners'."""
        mine = tuple(partitions)
        self.local = lambda active: max(1, len({owner(p, of, active) for p in mine}))

    def admit(self, parsed: list[tuple[Envelope, str | None]], now: float) -> list[Any]:
        with self.lock:
            self.gate.refresh()
            return self.gate.admit(parsed, now)


def check_entry_step(topo: Topology, task_window_s: float) -> None:
    """``ValueError`` naming what keeps admission from being the entry operator's first
    step (``las.site.entry_step_refusal``), for a deployment that asked for it."""
    refused = entry_step_refusal(topo, task_window_s)
    if refused is not None:
        raise ValueError(f"{refused}: use admission: ingress (or auto)")


def decode_chunk(
    spec: SourceSpec, msgs: list[Any], now: float
) -> tuple[list[tuple[int, Envelope, str | None]], list[tuple[Any, str]]]:
    """The records as (offset, event, LAS key), and the undecodable ones with the reason."""
    events, bad = [], []
    for m in msgs:
        try:
            _, stamp = m.timestamp()
            ev, key = spec.event(m.value(), m.topic(), m.partition(), m.offset(), stamp, now)
        except BadRecord as exc:
            bad.append((m, f"ingress: {exc}"))
            continue
        events.append((m.offset() or 0, ev, key))
    return events, bad


def dead_record(msg: Any, reason: str, now: float) -> bytes:
    """An undecodable source record as the ingress dead-letters it."""
    return DeadLetter.of(
        "ingress", msg.topic(), msg.value() or b"", reason, partition=msg.partition(),
        offset=msg.offset(), at=now,
    ).encoded()  # fmt: skip


class EntryClock:
    """A source partition's reader clock in its slot (``SourceClock``), and what the slot
    has seen of its task's wake-ups."""

    def __init__(self, idle_s: float, board: WakeBoard) -> None:
        self.clock = SourceClock(idle_s)
        self.board = board
        self.seen = board.seq

    def declaration(self, at_end: bool) -> Declaration:
        """The partition's state now, as its single input ``source/0`` (the caller holds
        the board's lock): a wake-up elsewhere in the task restarts the idle count."""
        if self.board.seq != self.seen:
            self.seen = self.board.seq
            self.clock.wake()
        now = time.monotonic()
        self.clock.position(at_end, now)
        return Declaration("source", 0, 1, self.clock.wm, self.clock.idle(now))
