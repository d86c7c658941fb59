"""A task's Kafka reading: every slot's planned offset range with one consumer, and, in a
window, what upstream produces meanwhile, handed to each slot's thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from elastic_sps.io.connections import kafka_config
from elastic_sps.io.kafka_io import take_ready
from elastic_sps.services.dataplane.feed import WINDOW_END, Batch, Feed
from elastic_sps.services.dataplane.handover import KeyedMoves
from elastic_sps.services.dataplane.options import SourceOptions
from elastic_sps.services.dataplane.slots import Slot
from elastic_sps.services.dataplane.worker import WORKER

FETCH_WAIT_MS = 200


def consumer_for(o: SourceOptions, topic: str, lane: int = 0) -> Consumer:
    """The worker's consumer of one operator's topic: assign only, no group (Spark's
    offsets are the progress). ``lane``: which of the topic's consumers, when a task's
    replicas that outlived it (``overlap``) still read with another.

    One per topic (and lane): Spark gives a worker any operator's task, and one consumer
    moved from topic to topic each batch often took 0.2-1 s to deliver the first planned
    record of the new one, eating the task's window (twitter peers at 2,000 events/s: p50 342 ->
    155 ms, p90 1.2 s -> 0.48 s end to end with one consumer per topic)."""
    name = ("consumer", o.bootstrap, topic) if lane == 0 else ("consumer", o.bootstrap, topic, lane)
    consumer: Consumer = WORKER.get(
        name,
        lambda: Consumer(
            kafka_config(
                o.bootstrap,
                **{
                    "group.id": "sps-dataplane",
                    "enable.auto.commit": False,
                    "enable.partition.eof": False,
                    # how long the broker holds a fetch of partitions with nothing new
                    # (data ends the wait at once): fetches of an idle topic cost the
                    # broker CPU, and a partition assigned meanwhile waits this long
                    "fetch.wait.max.ms": FETCH_WAIT_MS,
                },
            )
        ),
    )
    return consumer


def warm_consumers(o: SourceOptions, topics: tuple[str, ...], lanes: int = 1) -> None:
    """Once per worker and set of topics: a consumer for every operator topic (in each of
    ``lanes``), its metadata fetched, so a worker's first batch on a topic does not wait
    for the connection (the warm-up batch runs this before the dataplane reports itself
    healthy)."""
    WORKER.get(
        ("consumers_warm", o.bootstrap, topics, lanes),
        lambda: [
            consumer_for(o, t, lane).list_topics(t, timeout=10)
            for t in topics
            for lane in range(lanes)
        ],
    )


def read_slots(
    o: SourceOptions, topic: str, slots: tuple[Slot, ...], lane: int = 0
) -> dict[int, list[Any]]:
    """Every slot's records [start, end) with one consumer (assign, no group)."""
    out: dict[int, list[Any]] = {s.replica: [] for s in slots}
    todo = {s.replica: s for s in slots if s.events}
    if not todo:
        return out
    consumer = consumer_for(o, topic, lane)
    consumer.assign([TopicPartition(topic, s.replica, s.start) for s in todo.values()])
    nxt = {j: s.start for j, s in todo.items()}  # offsets can skip (markers): track them
    deadline = time.monotonic() + 60
    while any(nxt[j] < s.end for j, s in todo.items()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: offsets up to {todo} not readable in 60 s ({nxt})")
        left = sum(max(0, s.end - nxt[j]) for j, s in todo.items())
        for msg in take_ready(consumer, min(5000, left), 0.5):
            err = msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(f"{topic}[{msg.partition()}]: {err}")
                continue
            j, at = msg.partition() or 0, msg.offset() or 0
            slot = todo.get(j)
            if slot is None or at < nxt[j] or at >= slot.end:
                continue
            out[j].append(msg)
            nxt[j] = at + 1
    consumer.unassign()
    return out


READ_MAX = 1000  # records one read of a live window takes
STOP_CHECK_S = 0.1  # how often a reader asks whether its epoch must end early


@dataclass
class Reads:
    """What a source partition's reader tells its slots: each partition's end as last
    fetched (``ends``), and each read's records with when it began and whether it left
    nothing waiting (``received``: λ_G's arrivals)."""

    ends: dict[int, int] = field(default_factory=dict)
    received: Callable[[list[Any], float, bool], None] | None = None
    read_to: dict[int, int] = field(default_factory=dict)  # partition -> next offset read
    counted: dict[int, int] = field(default_factory=dict)  # below: counted by an earlier task
    paused: set[int] = field(default_factory=set)

    def count(self, msgs: list[Any], began: float, short: bool, starts: dict[int, int]) -> None:
        """A read's records as arrivals, those an earlier task counted left out; caught up
        only when the read came back short with nothing paused and every partition read
        to the end its reader last saw (right after an assign, reads come back empty
        while the first fetch is under way)."""
        if self.received is None:
            return
        fresh = []
        for m in msgs:
            if m.error() is not None:
                continue
            j, at = m.partition() or 0, m.offset() or 0
            self.read_to[j] = at + 1
            if at >= self.counted.get(j, 0):
                fresh.append(m)
        done = all(
            j in self.ends and max(self.read_to.get(j, 0), at) >= self.ends[j]
            for j, at in starts.items()
        )
        self.received(fresh, began, short and not self.paused and done)

    def note(self, consumer: Consumer, topic: str, partitions: Iterable[int]) -> None:
        for j in partitions:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, j), cached=True)
            if high is not None and high >= 0:
                self.ends[j] = high


# A replica's feed holds at most about this much of its work read ahead: a partition
# handed to another replica moves behind what its old owner was handed (``handover``),
# and what is read ahead is read again by the next epoch's task.
READ_AHEAD_S = 0.5


def read_ahead(et_s: float) -> int:
    """Records a feed may hold before its partitions pause: ``READ_AHEAD_S`` of the
    operator's work, never under one read."""
    return max(READ_MAX, int(READ_AHEAD_S / et_s)) if et_s > 0 else 50 * READ_MAX


@dataclass
class ReadAhead:
    """Pauses the partitions of a feed that holds more than ``limit`` records, resumes them
    once it is down to half (the consumer goes on from the next offset not handed on)."""

    consumer: Consumer
    topic: str
    limit: int
    paused: set[int] = field(default_factory=set)

    def apply(self, feeds: dict[int, Feed]) -> None:
        sizes = {id(q): q.records() for q in feeds.values()}
        full = {j for j, q in feeds.items() if sizes[id(q)] > self.limit} - self.paused
        low = {j for j in self.paused if sizes[id(feeds[j])] <= self.limit // 2}
        if full:
            self.consumer.pause([TopicPartition(self.topic, j) for j in full])
        if low:
            self.consumer.resume([TopicPartition(self.topic, j) for j in low])
        self.paused |= full  # in place: the slots read it
        self.paused -= low


def _hand_on(topic: str, msgs: list[Any], feeds: dict[int, Feed]) -> None:
    """A read's records to their partitions' feeds, a batch per partition."""
    batches: dict[int, list[Any]] = {}
    for msg in msgs:
        err = msg.error()
        if err is not None:
            if err.code() != KafkaError._PARTITION_EOF:
                raise RuntimeError(f"{topic}[{msg.partition()}]: {err}")
            continue
        j = msg.partition() or 0
        if j in batches:
            batches[j].append(msg)
        else:
            batches[j] = [msg]
    at = time.perf_counter()
    for j, records in batches.items():
        feeds[j].put_batch(Batch(records, at))


def feed_window(
    o: SourceOptions,
    topic: str,
    feeds: dict[int, Feed],
    starts: dict[int, int],
    deadline: Callable[[], float],
    stop: Callable[[], bool] = lambda: False,
    moves: KeyedMoves | None = None,
    reads: Reads | None = None,
    ahead: int = 50 * READ_MAX,
    lane: int = 0,
) -> None:
    """Read the live slots' partitions from ``starts`` until ``deadline()`` (monotonic;
    it may move later while the window runs, ``overlap``), or until
    ``stop`` says the epoch must end, handing each read's records to their slots, a
    partition's as one ``Batch`` with its arrival time; between reads ``moves`` may hand
    partitions to other replicas (it reroutes ``feeds``), and ``reads`` learns the
    partitions' ends and what each read took; a feed holds at most about ``ahead``
    records (``ReadAhead``). Always ends every feed."""
    consumer = consumer_for(o, topic, lane)
    pacing = ReadAhead(consumer, topic, ahead, reads.paused if reads is not None else set())
    asked = time.monotonic()
    ended = {id(q): q for q in feeds.values()}
    try:
        if feeds:
            consumer.assign([TopicPartition(topic, j, at) for j, at in starts.items()])
        while feeds and (left := deadline() - time.monotonic()) > 0:
            if time.monotonic() - asked >= STOP_CHECK_S:
                asked = time.monotonic()
                if stop():
                    break
                if moves is not None:
                    moves(feeds)
                    ended.update({id(q): q for q in feeds.values()})
                if reads is not None:
                    reads.note(consumer, topic, feeds)
            pacing.apply(feeds)
            began = time.time()
            msgs = take_ready(consumer, READ_MAX, min(STOP_CHECK_S, left))
            if reads is not None:
                reads.count(msgs, began, len(msgs) < READ_MAX, starts)
            _hand_on(topic, msgs, feeds)
    finally:
        if pacing.paused:  # the worker's consumer serves the next task unpaused
            consumer.resume([TopicPartition(topic, j) for j in pacing.paused])
        if feeds:
            consumer.unassign()
        for q in ended.values():
            q.put(WINDOW_END)


_LANES = threading.Lock()


def take_lane(o: SourceOptions, topic: str) -> int:
    """A consumer of ``topic`` no live window of this worker reads with (``free_lane``
    gives it back): lane 0 unless replicas that outlived their task hold it."""
    with _LANES:
        busy: set[int] = WORKER.get(("lanes", o.bootstrap, topic), set)
        lane = min(set(range(len(busy) + 1)) - busy)
        busy.add(lane)
        return lane


def free_lane(o: SourceOptions, topic: str, lane: int) -> None:
    with _LANES:
        WORKER.get(("lanes", o.bootstrap, topic), set).discard(lane)
