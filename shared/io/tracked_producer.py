"""The true end of every dataplane partition, recorded by the producers themselves.

Every dataplane topic is written by this project's code: each producer reads the exact
offset of each record from its delivery reports and raises ``Keys.ends(topic)`` (a
hash partition -> end) with a max-update, so several producers writing one partition
never move an end backwards. Why it stays with Apache Kafka as the broker: the routers
and the ingress read every successor's backlog (end - committed) every 0.2 s from one
Redis pipeline; the broker's watermarks would cost a ListOffsets round trip each time.
With the Tansu broker (``SPS_EMBEDDED_BROKER=tansu``) it is also the only right source
of partition ends: Tansu's ListOffsets is wrong for multi-record batches.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

from confluent_kafka import Producer

from elastic_sps.io.connections import kafka_config
from elastic_sps.io.knowledge_base import Keys

_RAISE = """
for i = 1, #ARGV, 2 do
  local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '0')
  if tonumber(ARGV[i + 1]) > cur then redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
return 1
"""

AWAIT_POLL_S = 0.005  # a wait for a mark's reports serves the client's reports this often
STAGE_MAX = 500  # records staged before they go to the client in one call


class Handed:
    """One thread's calls to the client and how far the client has reported them,
    delivered or failed. Calls to a named partition are counted per partition: its
    reports come in the order its records were handed on (the idempotent producer's),
    so the report of a call's last record covers the call. Calls by key are numbered:
    their records land on partitions whose reports come in any order, so a call is
    covered once each of its records is reported."""

    def __init__(self) -> None:
        self.sent: dict[tuple[str, int], int] = {}  # its thread's alone, as ``calls``
        self.calls = 0  # the last call by key handed on
        self.numbered = 0
        self.reported: dict[tuple[str, int], int] = {}
        self.open: dict[int, int] = {}  # call by key -> its records not yet reported
        self.lock = threading.Lock()  # reports come on whichever thread polls

    def report(self, target: tuple[str, int], upto: int) -> None:
        with self.lock:
            if upto > self.reported.get(target, 0):
                self.reported[target] = upto

    def opened(self, n: int) -> int:
        """A call by key of ``n`` records about to be handed on: its number."""
        self.numbered += 1
        with self.lock:
            self.open[self.numbered] = n
        return self.numbered

    def report_by_key_refused(self, number: int) -> None:
        """The call raised: what it queued is not waited for (its task fails)."""
        with self.lock:
            self.open.pop(number, None)

    def report_by_key(self, number: int) -> None:
        with self.lock:
            left = self.open.get(number)
            if left is None:  # a refused call's (it raised)
                return
            if left > 1:
                self.open[number] = left - 1
            else:
                del self.open[number]

    def left(self, mark: Mark) -> int:
        """Of the records the mark covers, how many are not yet reported."""
        with self.lock:
            named = sum(max(0, n - self.reported.get(t, 0)) for t, n in mark.named.items())
            return named + sum(n for call, n in self.open.items() if call <= mark.calls)


def _reported(
    sink: Any, handed: Handed, target: tuple[str, int], upto: int, err: Any, msg: Any
) -> None:
    sink(err, msg)  # its end or failure first: a thread that sees it reported collects it
    handed.report(target, upto)


@dataclass(frozen=True)
class Mark:
    """What one thread had handed to the client at a moment (``TrackedProducer.mark``):
    its records per named partition, and its calls by key up to ``calls``."""

    handed: Handed
    named: dict[tuple[str, int], int]
    calls: int


class _Stage:
    """One thread's staged records, by topic and partition, and what it handed on."""

    def __init__(self) -> None:
        self.by_target: dict[tuple[str, int | None], list[dict[str, Any]]] = {}
        self.count = 0
        self.handed = Handed()


class TrackedProducer:
    """A confluent-kafka producer whose ``flush`` also publishes the partitions' ends."""

    def __init__(self, bootstrap: str, redis: Any, keys: Keys, **conf: Any) -> None:
        # idempotent: a retried batch never lands behind the records produced after it
        # (a watermark declaration must follow the events it covers)
        self.p = Producer(
            kafka_config(bootstrap, **{"linger.ms": 5, "enable.idempotence": True, **conf})
        )
        self.redis = redis
        self.keys = keys
        self._ends: dict[tuple[str, int], int] = {}
        # several threads flush, poll and collect at once: an end raised by one while
        # another publishes and clears must land in the next publication, not be lost
        self._ends_lock = threading.Lock()
        # a partition named at produce: its reports land in its own dict, the last
        # delivered record under None, each failure under its error, by the dict's own
        # __setitem__ (C, no Python frame per record). The last report holds the end:
        # an idempotent producer reports a partition's records in their offset order.
        self._last: dict[tuple[str, int], dict[Any, Any]] = {}
        # failed deliveries, ever: each thread's flush raises for those since its last
        # (several threads flush one producer; any of them may collect another's reports)
        self.failures = 0
        self._failures_lock = threading.Lock()  # ``+=`` from two threads can lose one
        self._raise = redis.register_script(_RAISE)
        # each thread's records staged for one ``produce_batch`` call per topic and
        # partition (a librdkafka enqueue and broker-thread wakeup per record cost about
        # twice the CPU; a record's own partition is not honoured in a batch): a thread's
        # staged records go before anything it produces or flushes after them
        self._local = threading.local()
        self._room = int(conf.get("queue.buffering.max.messages", 100_000)) // 2

    def _report(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._failed(1)
            return
        self._raise_end((msg.topic(), msg.partition()), msg.offset() + 1)

    def _raise_end(self, key: tuple[str, int], end: int) -> None:
        with self._ends_lock:
            if end > self._ends.get(key, 0):
                self._ends[key] = end

    def _failed(self, n: int) -> None:
        if n:
            with self._failures_lock:
                self.failures += n

    def _stage(self) -> _Stage:
        stage: _Stage | None = getattr(self._local, "stage", None)
        if stage is None:
            stage = self._local.stage = _Stage()
            self._local.seen = self.failures  # earlier failures were other threads'
        return stage

    def stage(
        self, topic: str, value: bytes, partition: int | None, key: bytes | None = None
    ) -> None:
        """``produce``, enqueued with the calling thread's others at its next ``send``,
        ``produce`` or ``flush`` (or once ``STAGE_MAX`` wait): a partition's records in
        the order staged (those staged by key, ``partition`` None, in order among
        themselves)."""
        stage = self._stage()
        stage.by_target.setdefault((topic, partition), []).append({"value": value, "key": key})
        stage.count += 1
        if stage.count >= STAGE_MAX:
            self._send(stage)

    def send(self) -> None:
        """What the calling thread staged, to the client (delivered in the background,
        as ``produce``)."""
        stage = self._stage()
        if stage.count:
            self._send(stage)

    def discard(self) -> None:
        """Drop what the calling thread staged (its task failed: its input is read
        again), so a later task on the thread does not send it."""
        stage = self._stage()
        stage.by_target.clear()
        stage.count = 0

    def _send(self, stage: _Stage) -> None:
        """A thread's staged records, a call per topic and partition. The client's queue
        is kept from filling first: a batch refused in part could reorder."""
        while len(self.p) > self._room:
            self.p.poll(0.05)
        handed = stage.handed
        while stage.by_target:  # each target off the stage once queued: none sent twice
            (topic, partition), msgs = next(iter(stage.by_target.items()))
            if partition is None:
                number, report = self._by_key(handed, len(msgs))
                try:
                    queued = self.p.produce_batch(topic, msgs, on_delivery=report)
                except BaseException:
                    handed.report_by_key_refused(number)
                    raise
            else:
                sink, target = self._sink(topic, partition), (topic, partition)
                upto = handed.sent.get(target, 0) + len(msgs)
                msgs[-1]["callback"] = partial(_reported, sink, handed, target, upto)
                queued = self.p.produce_batch(topic, msgs, partition=partition, on_delivery=sink)
            if queued != len(msgs):
                errors = {str(m["_error"]) for m in msgs if "_error" in m}
                if partition is None:
                    handed.report_by_key_refused(number)
                raise RuntimeError(f"{len(msgs) - queued} records to {topic} refused: {errors}")
            if partition is None:
                handed.calls = number
            else:
                handed.sent[target] = upto
            del stage.by_target[(topic, partition)]
            stage.count -= len(msgs)

    def produce(
        self, topic: str, value: bytes, partition: int | None, key: bytes | None = None
    ) -> None:
        """``partition`` None: the key's partition (the client's partitioner). After
        what the calling thread staged."""
        self.send()
        self._produce(topic, value, partition, key)

    def _produce(self, topic: str, value: bytes, partition: int | None, key: bytes | None) -> None:
        handed = self._stage().handed
        while True:
            try:
                if partition is None:
                    number, report = self._by_key(handed, 1)
                    try:
                        self.p.produce(topic, value=value, key=key, on_delivery=report)
                    except BaseException:
                        handed.report_by_key_refused(number)
                        raise
                    handed.calls = number
                else:
                    target = (topic, partition)
                    upto = handed.sent.get(target, 0) + 1
                    report = partial(_reported, self._sink(topic, partition), handed, target, upto)
                    self.p.produce(
                        topic, value=value, key=key, partition=partition, on_delivery=report
                    )
                    handed.sent[target] = upto
                return
            except BufferError:  # local queue full: let deliveries drain
                self.p.poll(0.05)

    def _by_key(self, handed: Handed, n: int) -> tuple[int, Any]:
        """A call by key of ``n`` records: its number, and its records' report (their
        ends, and the call covered once each is reported)."""
        number = handed.opened(n)

        def report(err: Any, msg: Any) -> None:
            try:
                self._report(err, msg)
            finally:
                handed.report_by_key(number)

        return number, report

    def _sink(self, topic: str, partition: int) -> Any:
        reports = self._last.get((topic, partition))
        if reports is None:  # setdefault: two threads never make two dicts for one
            reports = self._last.setdefault((topic, partition), {})
        return reports.__setitem__

    def _collect(self) -> None:
        """The named partitions' reports since the last flush into ends and failures."""
        for key, reports in list(self._last.items()):
            last = reports.pop(None, None)
            # each error popped on its own: another thread's poll may add reports meanwhile.
            # Taken and counted under the lock: a flush that collects after another
            # thread took an error finds it counted (distinct errors: at least that many)
            with self._failures_lock:
                errors = [k for k in list(reports) if k is not None]
                self.failures += sum(reports.pop(e, None) is not None for e in errors)
            if last is not None:
                self._raise_end(key, last.offset() + 1)

    def _await(self, mark: Mark, timeout: float) -> int:
        """Serve reports until the mark's records are all reported; how many are not."""
        deadline = time.monotonic() + timeout
        while left := mark.handed.left(mark):
            if time.monotonic() >= deadline:
                return left
            self.p.poll(AWAIT_POLL_S)
        return 0

    def answered(self) -> None:
        """The calling thread answers for every failure so far: its task failed, and the
        retry produces again what it produced (a pooled thread's later tasks start clean)."""
        self._stage()
        self._local.seen = self.failures

    def seen(self) -> int:
        """The failure count the calling thread has answered for: at its first use, or
        when its last flush raised."""
        self._stage()
        seen: int = self._local.seen
        return seen

    def mark(self) -> Mark:
        """What the calling thread has handed to the client, its staged records sent
        first: another thread's ``flush(until=...)`` waits for these alone."""
        self.send()
        handed = self._stage().handed
        return Mark(handed, dict(handed.sent), handed.calls)

    def flush(
        self, timeout: float = 30.0, since: int | None = None, until: Mark | None = None
    ) -> None:
        """What the calling thread staged and everything produced, delivered; with
        ``until``, only the records of that mark (the others' records, which keep
        coming, are not waited for). ``since``: raise for the failures after that count
        (another thread's ``seen``, when this one flushes on its behalf), not only those
        after this thread's last flush."""
        self.send()
        left = self.p.flush(timeout) if until is None else self._await(until, timeout)
        self._collect()
        if left:
            raise RuntimeError(f"{left} records not delivered within {timeout}s")
        failed = self.failures - (self._local.seen if since is None else since)
        if failed:
            # seen before raising: the producer is cached per worker, and one failed batch
            # (Spark retries the task) must not fail every later batch of the thread
            self._local.seen = self.failures
            raise RuntimeError(f"{failed} records failed delivery")
        with self._ends_lock:
            ends, self._ends = self._ends, {}
        by_topic: dict[str, list[int]] = {}
        for (topic, part), end in ends.items():
            by_topic.setdefault(topic, []).extend([part, end])
        for topic, args in by_topic.items():
            self._raise(keys=[self.keys.ends(topic)], args=args)
