"""A group of replica slots' work for one micro-batch (runs in a Spark Python worker).

The task reads every slot's offset range with one consumer, then runs each slot in its
own thread (``slots.py`` says why), and publishes once: one producer flush, one Redis
pipeline, one metrics record per slot.

Operator cost comes in two modes (``cost_mode``), beside ``none`` (the operator's own
work only):

* ``wait``: the replica is occupied ``et_ms`` per event, as an operator bound by a remote
  call (an enrichment lookup, a database write, a model server) is. It sleeps the rest
  of ``et_ms`` after its real work, so its capacity is 1/et per replica on any machine:
  what the embedded demo uses.
* ``cpu``: the operator's real work plus burned CPU up to ``et_ms``, for clusters with a
  core per task slot.

Clients are cached per worker process (Spark reuses Python workers); so is each entry
operator's LAS sketch state, which must outlive a batch to become stable.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from queue import SimpleQueue
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from services.dataplane.cluster import executor_id
from services.dataplane.observe import counts_key
from services.dataplane.options import SourceOptions
from services.dataplane.sample import LatencySample
from services.dataplane.slots import Slot, SlotRow
from shared.contracts.action import DeadLetter
from shared.contracts.metrics import OperatorCounters
from shared.control.grouping import ROUTING_REFRESH_S, LoadAwareRouter, backlog_utilisation
from shared.io.connections import kafka_config
from shared.io.envelope import BadEvent, Envelope, decode
from shared.io.id_ledger import IdBatch
from shared.io.kafka_io import take_ready
from shared.io.knowledge_base import Keys
from shared.io.rescale_timeline import CountWatch, active_count
from shared.io.tracked_producer import TrackedProducer, read_backlog
from shared.pipeline.chain import open_runnable
from shared.pipeline.failures import Failure, FailureGuard, describe
from shared.pipeline.operators import Context, Runnable, normalise


class WorkerState:
    """What outlives a task in a reused Spark Python worker: its clients, the opened
    user operators, their failure guards, the LAS sketch state. One per worker process
    (``WORKER``): Spark unpickles a fresh reader for every task, so nothing else lasts."""

    def __init__(self) -> None:
        self._held: dict[Any, Any] = {}
        self._frozen = False

    def get(self, key: Any, make: Any) -> Any:
        if key not in self._held:
            self._held[key] = make()
        return self._held[key]

    def freeze_heap_once(self) -> None:
        """pyspark's daemon runs ``gc.collect()`` after every task of a reused worker; a
        full collection over this project's modules cost ~60 ms per task, 84 % of the
        worker's CPU (measured with py-spy). Moving what is loaded now into the permanent
        generation makes those collections ~free.

        pandas first: pyarrow imports it lazily at the first batch that returns rows
        (``RecordBatch.from_arrays`` in pyspark's ``plan_data_source_read``), so each
        worker imported it during its first real batch, and its modules, loaded after the
        freeze, made every later collection walk them again: at saturation the two were
        ~0.45 and ~0.2 of the workers' samples (py-spy, ``profile_dataplane.py``)."""
        if not self._frozen:
            # without pandas, pyspark's Arrow path has nothing to preload
            with contextlib.suppress(ImportError):
                import pandas  # noqa: F401
            gc.collect()
            gc.freeze()
            self._frozen = True


WORKER = WorkerState()

# An operator's ``ctx.writes`` go to Redis in one round trip per this many writes or this
# many seconds, and at the slot's end. Once per slot and window, as before, a sink's
# per-event writes (8,000 a slot at 12,000 events/s) ran for ~0.2 s after its window had
# closed: 14 % of a slot thread's time (py-spy, bench_hops --rate 12000), during which the
# batch could not end and no task read. Spread out, the same writes overlap the serving.
WRITES_BATCH = 500
WRITES_EVERY_S = 0.1


def writes_due(stacked: int, since_s: float) -> bool:
    """Whether ``stacked`` writes, the last sent ``since_s`` ago, go out now."""
    return stacked >= WRITES_BATCH or (stacked > 0 and since_s >= WRITES_EVERY_S)


def _spin(seconds: float) -> None:
    """``cpu`` cost: burn the core like a real operator would (sleep would free it)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@dataclass
class Occupancy:
    """A replica's clock in ``wait``/``cpu`` mode over one micro-batch, whose events are
    all there when it starts: each event occupies the replica for max(et, real work).
    The clock runs ahead of the wall by what the replica owes; it sleeps only when ahead
    by > 2 ms, and an oversleep shortens the next sleep, so sleep granularity neither
    loses nor adds capacity."""

    mode: str
    et_s: float
    free_at: float = field(default_factory=time.perf_counter)

    def end(self, began: float) -> float:
        """Account for one event whose work started at ``began``; returns the time it
        occupied the replica."""
        work = time.perf_counter() - began
        if self.mode == "cpu" and self.et_s > work:
            _spin(self.et_s - work)
        occupied = max(self.et_s, work) if self.mode in ("wait", "cpu") else work
        self.free_at += occupied  # the batch's events are all waiting: no idle gaps
        if self.mode == "wait":
            ahead = self.free_at - time.perf_counter()
            if ahead > 0.002:
                time.sleep(ahead)
        return occupied

    def arrive(self, at: float) -> None:
        """An event that arrived at ``at`` (perf_counter) while the task ran: a replica
        idle before it owes nothing for the gap."""
        self.free_at = max(self.free_at, at)

    def settle(self) -> None:
        """The batch ends when the replica has served its last event's time."""
        ahead = self.free_at - time.perf_counter()
        if self.mode == "wait" and ahead > 0:
            time.sleep(ahead)


@dataclass
class SlotResult:
    replica: int
    received_from: dict[str, float] = field(default_factory=dict)
    processed: int = 0
    emitted: int = 0
    emitted_to: dict[str, float] = field(default_factory=dict)  # per successor, Eq. 6
    dead: int = 0
    expired: int = 0
    busy: float = 0.0
    latencies: LatencySample = field(default_factory=lambda: LatencySample(200))
    queuing: LatencySample = field(default_factory=lambda: LatencySample(500))
    las_keys: list[int] = field(default_factory=list)
    las_times: list[float] = field(default_factory=list)
    ids: IdBatch | None = None  # the id ledger's entries, when tracking is on
    start: int = 0  # the offset the slot began at
    next_offset: int = 0  # processed up to here (exclusive)
    probes: list[str] = field(default_factory=list)


@dataclass
class GroupRun:
    """What every slot of one task shares: options, clients, the operator."""

    o: SourceOptions
    operator: str
    active: int

    def __post_init__(self) -> None:
        from shared.io.redis_client import redis_client

        o = self.o
        self.topo = WORKER.get(("topo", o.topology_name, o.topology_doc), o.topology)
        self.r = WORKER.get(("redis", o.redis_url), lambda: redis_client(o.redis_url))
        self.keys = Keys(o.prefix)
        self.td = o.td
        self.producer: TrackedProducer = WORKER.get(
            ("producer", o.bootstrap, o.redis_url, self.keys.prefix),
            lambda: TrackedProducer(o.bootstrap, self.r, self.keys),
        )
        self.op = self.topo[self.operator]
        # the user's operator: opened once per worker process (a model, a client), and
        # its failure guard outlives a batch, so a share of failures spans batches
        self.impl: Runnable = WORKER.get(
            ("operator", self.operator, self.op.code, self.keys.prefix), self._open_operator
        )
        self.guard: FailureGuard = WORKER.get(
            ("guard", self.operator, self.keys.prefix),
            lambda: FailureGuard(
                self.operator,
                self.op.on_error,
                o.failure_share,
                o.failure_window,
            ),
        )
        self.guard_lock = threading.Lock()
        self.cost_mode = o.cost_mode
        self.t_out = o.t_out_s
        self.successors = [e.dst for e in self.topo.successors[self.operator]]
        self.successor_names = tuple(self.successors)
        self.topic = self.keys.topic(self.operator)
        self.track_ids = o.track_ids
        self._routing: dict[str, tuple[float, int, list[float]]] = {}
        self._routing_lock = threading.Lock()

    def _open_operator(self) -> Runnable:
        return open_runnable(
            self.topo, self.operator, Context(self.operator, self.r, self.keys.prefix)
        )

    def routing(self, successor: str) -> tuple[int, list[float]]:
        """The successor's active count and its replicas' utilisation from their backlog,
        read at most every ``ROUTING_REFRESH_S`` for all of this task's slots. A count
        that differs from the one this worker last saw is a change taking effect: the
        routers send to the new replicas from now on (its standby slots serve them in
        their window, ``slots.plan_slots``), so it is recorded as the change's effect."""
        with self._routing_lock:
            at, n, util = self._routing.get(successor, (-1.0, 0, []))
            if time.monotonic() - at < ROUTING_REFRESH_S:
                return n, util
            op = self.topo[successor]
            n = active_count(
                self.r.get(self.keys.active(successor)), op.min_replicas, op.max_replicas
            )
            backlog = read_backlog(self.r, self.keys, successor, op.max_replicas)
            util = backlog_utilisation(backlog[:n], op.et_s, self.td)
            self._routing[successor] = (time.monotonic(), n, util)
        watch = WORKER.get(("counts_seen", self.keys.prefix), lambda: CountWatch(self.r, self.keys))
        watch.see(successor, n)  # one per worker: its tasks' routers share what they saw
        return n, util

    def router(self, successor: str, slot: int) -> LoadAwareRouter:
        _, util = self.routing(successor)
        return LoadAwareRouter(
            self.topo[successor].et_s, self.td, util, concurrency=self.active, start=slot
        )


def _consumer(o: SourceOptions, topic: str) -> Consumer:
    """The worker's consumer of one operator's topic: assign only, no group (Spark's
    offsets are the progress).

    One per topic: Spark gives a worker any operator's task, and one consumer moved from
    topic to topic each batch often took 0.2-1 s to deliver the first planned record of
    the new one, eating the task's window (twitter peers at 2,000 events/s: p50 342 ->
    155 ms, p90 1.2 s -> 0.48 s end to end with one consumer per topic)."""
    consumer: Consumer = WORKER.get(
        ("consumer", o.bootstrap, topic),
        lambda: Consumer(
            kafka_config(
                o.bootstrap,
                **{
                    "group.id": "sps-dataplane",
                    "enable.auto.commit": False,
                    "enable.partition.eof": False,
                    "fetch.wait.max.ms": 50,
                },
            )
        ),
    )
    return consumer


def warm_consumers(o: SourceOptions, topics: tuple[str, ...]) -> None:
    """Once per worker and set of topics: a consumer for every operator topic, its
    metadata fetched, so a worker's first batch on a topic does not wait for the
    connection (the warm-up batch runs this before the dataplane reports itself healthy)."""
    WORKER.get(
        ("consumers_warm", o.bootstrap, topics),
        lambda: [_consumer(o, t).list_topics(t, timeout=10) for t in topics],
    )


def read_slots(o: SourceOptions, topic: str, slots: tuple[Slot, ...]) -> dict[int, list[Any]]:
    """Every slot's records [start, end) with one consumer (assign, no group)."""
    out: dict[int, list[Any]] = {s.replica: [] for s in slots}
    todo = {s.replica: s for s in slots if s.events}
    if not todo:
        return out
    consumer = _consumer(o, topic)
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


class SlotRun:
    """One replica slot's work in one task: ``handle`` each event in offset order, then
    ``finish``. Clients and routers are set up at the first event, so a slot that gets
    nothing costs nothing."""

    def __init__(self, g: GroupRun, slot: Slot) -> None:
        self.g, self.slot = g, slot
        self.res = SlotResult(slot.replica, ids=IdBatch(g.keys.prefix) if g.track_ids else None)
        self.res.start = self.res.next_offset = slot.start
        self.clock = Occupancy(g.cost_mode, g.op.et_s)
        self.ctx: Context | None = None
        self.routers: dict[str, LoadAwareRouter] = {}
        self.routed_at = 0.0
        self.written_at = time.monotonic()

    def _ready(self) -> Context:
        g = self.g
        if self.ctx is None:
            self.ctx = Context(g.operator, g.r, g.keys.prefix, g.r.pipeline(transaction=False))
        if time.monotonic() - self.routed_at >= ROUTING_REFRESH_S:  # a window outlasts it
            # Rebuilt only when the count changed: a router restarted from the batch's
            # backlog snapshot every 0.2 s sent each restart's first events to the same
            # replicas (static:8's mean latency 0.78 -> 1.45 s).
            for s in g.successors:
                if s not in self.routers or len(self.routers[s].u) != g.routing(s)[0]:
                    self.routers[s] = g.router(s, self.slot.replica)
            self.routed_at = time.monotonic()
        return self.ctx

    def handle(self, msg: Any) -> None:
        """One event through the replica's steps: decode → expire → operate → emit →
        account (LAS sampling, ``t_out`` and the id ledger are the optional parts)."""
        ctx = self._ready()
        self.res.next_offset = max(self.res.next_offset, (msg.offset() or 0) + 1)
        ev = self._decode(msg)
        if ev is None or self._expired(ev):
            return
        began = time.perf_counter()
        outputs = self._operate(ev, ctx, msg)
        if outputs is None:
            return
        occupied = self.clock.end(began)
        self._emit(ev, outputs, msg.key())
        self._account(ev, msg, occupied)
        self._write_out(ctx)

    def _write_out(self, ctx: Context) -> None:
        """Send the operator's stacked writes when ``WRITES_BATCH`` are waiting or
        ``WRITES_EVERY_S`` has passed (at least once, as every write: they are sent
        before the batch's offsets are recorded, so a retried task sends them again)."""
        now = time.monotonic()
        if writes_due(len(ctx.writes), now - self.written_at):
            ctx.writes.execute()
            self.written_at = now

    def _decode(self, msg: Any) -> Envelope | None:
        try:
            return decode(msg.value())
        except BadEvent as exc:  # not an envelope: not from this project's producers
            self.res.dead += 1
            _dead_letter(self.g, self.slot.replica, msg, describe(exc))
            return None

    def _expired(self, ev: Envelope) -> bool:
        g, ids = self.g, self.res.ids
        if g.t_out and time.time() - (ev.adm or ev.ts) > g.t_out:
            self.res.expired += 1  # PA-SPS t_out: too old to be worth processing
            if ids is not None:
                ids.add(g.operator, "expired", ev.id)
            return True
        return False

    def _operate(
        self, ev: Envelope, ctx: Context, msg: Any
    ) -> list[tuple[str | None, bytes]] | None:
        """The user's code on one event, its outputs encoded; ``None``: it raised, and
        the event is dead-lettered (or the guard stops the dataplane: ``on_error``)."""
        g = self.g
        ctx.event_id = ev.id
        try:
            result = normalise(g.impl.process(ev.payload, ctx), g.operator, g.successor_names)
            if g.successors:
                outputs = [(d, ev.forward(g.operator, payload).encode()) for d, payload in result]
            elif g.op.output:  # a sink's outputs, as its output topic carries them
                outputs = [(None, _output_record(ev.id, payload)) for _, payload in result]
            else:
                outputs = []
        except Exception as exc:  # the user's code: any exception is its failure
            failure = describe(exc)
            with g.guard_lock:
                g.guard.failed(failure)  # raises OperatorFailing when it must stop
            self.res.dead += 1
            _dead_letter(g, self.slot.replica, msg, failure, ev.id)
            if self.res.ids is not None:
                self.res.ids.add(g.operator, "dead", ev.id)
            return None
        with g.guard_lock:
            g.guard.ok()
        return outputs

    def _account(self, ev: Envelope, msg: Any, occupied: float) -> None:
        g, res = self.g, self.res
        res.busy += occupied
        res.processed += 1
        if ev.lasc is not None:  # a LAS probe: answer Δ, naming the probe
            res.probes.append(f"{ev.id} {time.time() - ev.lasc!r}")
        if ev.adm is not None:
            res.queuing.add(1000.0 * (time.time() - ev.adm))
        res.received_from[ev.src] = res.received_from.get(ev.src, 0.0) + 1
        if g.operator in g.topo.entry_operators:
            res.las_keys.append(_las_key(msg.key(), ev))
            res.las_times.append(occupied)
        if res.ids is not None:
            res.ids.add(g.operator, "processed", ev.id)
        if not g.successors:
            res.latencies.add(1000.0 * (time.time() - ev.ts))

    def _emit(self, ev: Envelope, outputs: list[tuple[str | None, bytes]], key: Any) -> None:
        g, res = self.g, self.res
        if not g.successors:  # a sink: its outputs go to its output topic, if it has one
            if g.op.output:
                for _, body in outputs:
                    g.producer.produce(g.op.output, body, None, key)
            return
        for dst, body in outputs:
            for s in [dst] if dst is not None else g.successors:
                g.producer.produce(
                    g.keys.topic(s), body, partition=self.routers[s].choose(), key=key
                )
                res.emitted += 1
                res.emitted_to[s] = res.emitted_to.get(s, 0.0) + 1
                if res.ids is not None:
                    res.ids.add(s, "sent", ev.id)

    def finish(self) -> SlotResult:
        self.clock.settle()
        if self.ctx is not None:
            self.ctx.writes.execute()  # what is left of the operator's writes (_write_out)
        return self.res


_WINDOW_END = object()


def serve_slot(
    g: GroupRun, slot: Slot, msgs: list[Any], feed: SimpleQueue | None = None, deadline: float = 0
) -> SlotResult:
    """The slot's planned offset range [start, end) (offsets can skip, markers: the slot
    is done up to ``end`` whatever its last record's offset), then, with a window, what
    arrives on ``feed`` until ``deadline`` (a drain has none): an event taken after the
    deadline is left for the next batch, so the slot's progress stays contiguous."""
    run = SlotRun(g, slot)
    for msg in msgs:
        run.handle(msg)
    run.res.next_offset = max(run.res.next_offset, slot.end)
    while feed is not None:
        item = feed.get()
        if item is _WINDOW_END or time.monotonic() > deadline:
            break
        msg, arrived = item
        run.clock.arrive(arrived)
        run.handle(msg)
    return run.finish()


def _threads() -> ThreadPoolExecutor:
    """The worker's slot threads (a ``wait``-bound slot releases the GIL while occupied)."""
    pool: ThreadPoolExecutor = WORKER.get("threads", lambda: ThreadPoolExecutor(max_workers=64))
    return pool


def feed_window(
    o: SourceOptions,
    topic: str,
    feeds: dict[int, SimpleQueue],
    starts: dict[int, int],
    deadline: float,
) -> None:
    """Read the live slots' partitions from ``starts`` until ``deadline``, handing each
    record to its slot with its arrival time; always ends every feed."""
    consumer = _consumer(o, topic)
    try:
        if feeds:
            consumer.assign([TopicPartition(topic, j, at) for j, at in starts.items()])
        while feeds and (left := deadline - time.monotonic()) > 0:
            for msg in take_ready(consumer, 1000, min(0.05, left)):
                err = msg.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(f"{topic}[{msg.partition()}]: {err}")
                    continue
                feeds[msg.partition() or 0].put((msg, time.perf_counter()))
    finally:
        if feeds:
            consumer.unassign()
        for q in feeds.values():
            q.put(_WINDOW_END)


def run_windowed(
    g: GroupRun, slots: tuple[Slot, ...], records: dict[int, list[Any]], deadline: float
) -> list[SlotResult]:
    """Every slot in its own thread; the live ones go on with what upstream produces until
    ``deadline``, so an event crosses several operators within one micro-batch."""
    feeds: dict[int, SimpleQueue] = {s.replica: SimpleQueue() for s in slots if not s.drain}
    futures = [
        _threads().submit(serve_slot, g, s, records[s.replica], feeds.get(s.replica), deadline)
        for s in slots
    ]
    starts = {s.replica: s.end for s in slots if not s.drain}
    feed_window(g.o, g.topic, feeds, starts, deadline)
    return [f.result() for f in futures]


def run_group(
    o: SourceOptions, operator: str, slots: tuple[Slot, ...], active: int, serve_s: float = 0
) -> list[SlotRow]:
    """``serve_s``: windowed, how long the task serves (``slots.serve_seconds``; the
    task window when the driver did not say)."""
    WORKER.freeze_heap_once()
    began, began_at = time.monotonic(), time.time()
    g = GroupRun(o, operator, active)
    warm_consumers(o, tuple(g.keys.topic(name) for name in g.topo.names))
    records = read_slots(o, g.topic, slots)
    backlog = sum(len(r) for r in records.values())
    window = o.task_window_s
    if window > 0:
        results = run_windowed(g, slots, records, began + max(window, serve_s))
    elif len(slots) > 1:
        results = list(_threads().map(lambda s: serve_slot(g, s, records[s.replica]), slots))
    else:
        results = [serve_slot(g, s, records[s.replica]) for s in slots]
    g.producer.flush()  # downstream events first: their ends must be recorded before commit
    publish(g, results, TaskSpan(began_at, time.time(), backlog))
    by_slot = {s.replica: s for s in slots}
    return [
        SlotRow(
            r.replica,
            by_slot[r.replica].start,
            r.next_offset,
            r.processed,
            r.emitted,
            r.dead,
            r.busy,
        )
        for r in results
    ]


@dataclass(frozen=True)
class TaskSpan:
    """When a task served (wall clock) and how many planned records it found waiting:
    beside the batch log's planning times, what a batch spends with no task serving
    (``benchmarks/bench_hops.py``)."""

    start: float
    end: float
    backlog: int

    def record(self, pipe: Any, keys: Keys, operator: str) -> None:
        log = f"{keys.prefix}:dp:{operator}:tasks"
        pipe.rpush(log, f"{self.start:.3f} {self.end:.3f} {self.backlog}")
        pipe.ltrim(log, -1000, -1)


def publish(g: GroupRun, results: list[SlotResult], span: TaskSpan) -> None:
    """Sink ids, LAS sketches and Δ replies, utilisation, the counters and the offsets
    processed up to (what a drain waits on; with a window, where the next batch starts),
    the task's span, batched."""
    pipe = g.r.pipeline(transaction=False)
    span.record(pipe, g.keys, g.operator)
    done = {str(r.replica): r.next_offset for r in results if r.next_offset > r.start}
    if done:  # one task per partition per batch, batches in order: a plain HSET
        pipe.hset(g.keys.committed(g.operator), mapping=done)
        # which executor served how many slots: shows tasks spread over a cluster
        served_by = WORKER.get("exec", executor_id)
        pipe.hincrby(f"{g.keys.prefix}:dp:{g.operator}:executors", served_by, 1)
    las = None
    if g.operator in g.topo.entry_operators and g.o.las:
        las = WORKER.get(
            ("las", g.operator, g.keys.prefix), lambda: _las_operator(g.r, g.operator, g.keys)
        )
    totals = {
        "processed": sum(r.processed for r in results),
        "expired": sum(r.expired for r in results),
        "dead": sum(r.dead for r in results),
    }
    for name, n in totals.items():
        if n:  # the dataplane's /metrics reads these (observe.py)
            pipe.hincrby(counts_key(g.keys, g.operator), name, n)
    interval = int(time.time() // g.td)
    metrics_topic = g.o.metrics_topic
    for res in results:
        if res.ids is not None:
            res.ids.write(pipe)
        if res.probes:
            pipe.rpush(g.keys.las_deltas(g.operator), *res.probes)
        pipe.hset(
            g.keys.utilisation(g.operator),
            str(res.replica),
            min(1.0, res.processed * g.op.et_s / g.td),
        )
        if las is not None and res.las_keys:
            import numpy as np

            las.update_batch(np.asarray(res.las_keys, dtype=np.int64), np.asarray(res.las_times))
        rec = OperatorCounters(
            interval=interval,
            operator=g.operator,
            replica=res.replica,
            received_from=res.received_from,
            processed=res.processed,
            emitted=res.emitted,
            emitted_to=res.emitted_to,
            busy_s=res.busy,
            dead_lettered=res.dead,
            expired=res.expired,
            active_replicas=g.active,
            latency_ms=res.latencies.values,
            queuing_ms=res.queuing.values,
            latency_ms_sum=res.latencies.total,
            latency_n=res.latencies.n,
            queuing_ms_sum=res.queuing.total,
            queuing_n=res.queuing.n,
        )
        g.producer.produce(metrics_topic, rec.model_dump_json().encode(), partition=0)
    pipe.execute()
    g.producer.p.flush(10)


def _las_key(key: bytes | None, ev: Envelope) -> int:
    """The attribute the LAS sketches key on: the record key the ingress set."""
    return zlib.crc32(key if key else ev.id.encode()) % ((1 << 31) - 1)


def _las_operator(r: Any, operator: str, keys: Keys) -> Any:
    from shared.las.operator_side import LasOperator
    from shared.las.redis_store import SketchPublisher

    pub = SketchPublisher(r, operator, keys)
    return LasOperator(pub.publish_sketch, pub.send_delta, seed=zlib.crc32(operator.encode()))


def _output_record(event_id: str, value: Any) -> bytes:
    """A sink's output as its topic carries it: ``{"id", "value"}`` (bytes as base64)."""
    import orjson

    return orjson.dumps({"id": event_id, "value": value}, default=_b64)


def _b64(value: Any) -> Any:
    if isinstance(value, bytes):
        import base64

        return base64.b64encode(value).decode()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _dead_letter(
    g: GroupRun, replica: int, msg: Any, failure: Failure, event_id: str | None = None
) -> None:
    raw = msg.value() or b""
    rec = DeadLetter(
        service=f"dataplane:{g.operator}",
        topic=g.topic,
        partition=replica,
        offset=msg.offset(),
        reason=failure.reason,
        error_type=failure.error_type,
        traceback=failure.frames,
        event_id=event_id,
        payload=raw[:2000].decode("utf-8", "replace"),
        at=time.time(),
    )
    g.producer.produce(g.o.deadletter_topic, rec.model_dump_json().encode(), partition=0)
