"""The elastic Python Kafka data source. Each micro-batch plans a replica slot per
*active* replica of every operator (the counts read from the knowledge base as the batch
is planned), plus a slot for each inactive one that still holds events (with epochs,
every inactive one, served for the window: ``slots.plan_slots``), and packs the slots
into Spark tasks (``slots.py``); a task runs its slots' replicas (``task.run_group``).

Spark pickles the reader to its Python workers, so clients are opened lazily, never in
``__init__``.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from elastic_sps.services.dataplane.options import SourceOptions
from elastic_sps.services.dataplane.queues import BatchReads, list_source_ends, publish_queues
from elastic_sps.services.dataplane.slots import (
    SLOT_ROW_SCHEMA,
    Slot,
    capped_end,
    max_events_per_slot,
    pack,
    plan_keyed_slots,
    plan_slots,
    planned_occupancy,
    serve_seconds,
    tasks_per_operator,
)

# A pseudo-source in the offsets whose only change is the first batch: it runs before any
# event, so Spark starts the Python workers (which import the project) before the first
# events need them, and the dataplane reports itself healthy only after it
# (observe.health). An RDD job cannot warm them: streaming tasks do not reuse its workers.
WARM = "@warm"

log = logging.getLogger("sps.dataplane")
# each reader's queue reporter (``_report_queues``), by the stop event it waits on: kept
# off the reader, which Spark pickles
_REPORTERS: dict[int, threading.Event] = {}


class SlotGroup(InputPartition):
    """One Spark task: the replica slots of one operator it serves this micro-batch."""

    def __init__(
        self,
        operator: str,
        slots: tuple[Slot, ...],
        active: int,
        serve_s: float = 0.0,
        keyed_active: dict[str, int] | None = None,
        moves_in_task: bool = False,
        warm: bool = False,
        peers: tuple[tuple[Slot, ...], ...] = (),
        batch: str = "",
    ) -> None:
        self.operator, self.slots, self.active = operator, slots, active
        # every group of the operator's slots this batch (``slots`` among them) and the
        # batch's name: with overlapping windows a task may serve another's group
        self.peers, self.batch = peers, batch
        self.warm = warm  # the warm-up batch's: not yet serving (``run_group``'s ``warm``)
        self.serve_s = serve_s  # windowed: how long the task serves (slots.serve_seconds)
        # the keyed operators' counts the epoch is planned with: a change ends the epoch
        self.keyed_active = keyed_active or {}
        # a keyed operator whose partitions are all in this task hands moves over inside it
        self.moves_in_task = moves_in_task


def _ints(raw: Mapping[Any, Any]) -> dict[int, int]:
    return {int(k): int(v) for k, v in raw.items()}


class SpsKafkaSource(DataSource):
    """One option, ``settings``: a ``SourceOptions`` as JSON (``options.py``).

    Offsets are ``{operator: {partition: offset}}``: one query serves every operator, so
    an event crosses several operators in one micro-batch instead of one batch a hop."""

    @classmethod
    def name(cls) -> str:
        return "sps_kafka"

    def schema(self) -> str:
        return SLOT_ROW_SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return OperatorReader(SourceOptions.from_spark(dict(self.options)))


class OperatorReader(DataSourceStreamReader):
    def __init__(self, options: SourceOptions) -> None:
        self.o = options
        self.settings = options.settings
        self.operators = list(options.operators)
        self.windowed = options.task_window_s > 0
        self._r: Any = None
        self._topo: Any = None
        self._producer: Any = None
        self._admin: Any = None
        self._last_active: dict[str, int] = {}  # the counts the previous batch ran
        self._moved_in_task: set[str] = set()  # keyed operators whose tasks hand moves over
        # The last latestOffset's reads and the end it returned, kept until that batch's
        # tasks start: Spark runs one batch at a time, so until then no task publishes
        # progress and the reads are still the batch's (see partitions, commit).
        self._reads: BatchReads | None = None
        self._reads_end: dict | None = None
        self._planned = False  # a batch planned by this reader (this query's run) yet

    # -- driver side -------------------------------------------------------------------
    def _redis(self) -> Any:
        if self._r is None:
            from elastic_sps.io.redis_client import redis_client

            self._r = redis_client(self.o.redis_url)
        return self._r

    def _topology(self) -> Any:
        if self._topo is None:
            self._topo = self.o.topology()
        return self._topo

    def _keys(self) -> Any:
        from elastic_sps.io.knowledge_base import Keys

        return Keys(self.o.prefix)

    def _kb(self) -> Any:
        from elastic_sps.io.knowledge_base import KnowledgeBase

        return KnowledgeBase(self._redis(), self._keys())

    def _tasks(self, op: str) -> int:
        return tasks_per_operator(
            self._topology()[op].cpu_bound, self.settings.tasks_per_query, self.o.cores
        )

    def _pool(self, op: str) -> int:
        """The operator's input partitions: its pool, or the source's for an entry
        operator that admits (``admission: entry``)."""
        if self._admits(op):
            return self.o.entry_partitions
        return int(self._topology()[op].max_replicas)

    def _admits(self, op: str) -> bool:
        return self.o.entry_topic is not None and op == self._topology().entry_operators[0]

    def _topic(self, op: str) -> str:
        return (
            self.o.entry_topic
            if self._admits(op) and self.o.entry_topic
            else self._keys().topic(op)
        )

    def _owned(self, op: str) -> bool:
        """Whether the active replicas own the operator's partitions (a keyed operator's,
        or the source's read by the entry step), rather than one partition each."""
        return bool(self._topology()[op].stateful) or self._admits(op)

    def _read(self, with_ends: bool = True) -> BatchReads:
        """The batch's reads of the knowledge base, in one round trip."""
        from elastic_sps.io.knowledge_base import active_count

        keys, topo, ops = self._keys(), self._topology(), self.operators
        fixed = self.settings.fixed_replicas  # the benchmark's hard-coded baseline
        registry = with_ends and self.settings.partition_ends == "registry"
        pipe = self._redis().pipeline(transaction=False)
        if not fixed:
            pipe.mget([keys.active(op) for op in ops])
        for op in ops:
            pipe.hgetall(keys.committed(op))
            pipe.hgetall(keys.position(op))
        listed = [op for op in ops if not self._admits(op)] if registry else []
        for op in listed:  # the source's ends are the broker's: its producers keep none
            pipe.hgetall(keys.ends(keys.topic(op)))
        if self.o.holder:
            pipe.exists(keys.dataplane_stopping(self.o.holder))
        raw = iter(pipe.execute())
        if fixed:
            active = dict.fromkeys(ops, fixed)
        else:
            counts = zip(ops, next(raw), strict=True)
            active = {
                op: active_count(v, topo[op].min_replicas, topo[op].max_replicas)
                for op, v in counts
            }
        progress, served = {}, {}
        for op in ops:
            progress[op] = {str(j): v for j, v in _ints(next(raw)).items()}
            served[op] = {str(j): v for j, v in _ints(next(raw)).items()}
        ends = {op: self._per_partition(op, _ints(next(raw))) for op in listed}
        stopping = bool(self.o.holder) and bool(next(raw))
        if with_ends and (unlisted := [op for op in ops if op not in ends]):
            ends.update(self._watermark_ends(unlisted))
        return BatchReads(active, progress, ends, stopping, served)

    def _per_partition(self, op: str, ends: Mapping[int, int]) -> list[int]:
        return [ends.get(j, 0) for j in range(self._pool(op))]

    def _watermark_ends(self, ops: list[str]) -> dict[str, list[int]]:
        from elastic_sps.io.kafka_io import end_offsets

        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            from elastic_sps.io.connections import kafka_config

            self._admin = AdminClient(kafka_config(self.o.bootstrap))
        ends = end_offsets(self._admin, {self._topic(op): self._pool(op) for op in ops})
        return {op: ends[self._topic(op)] for op in ops}

    def initialOffset(self) -> dict:
        start = {op: {str(j): 0 for j in range(self._pool(op))} for op in self.operators}
        return {**start, WARM: {"0": 0}}

    def latestOffset(self, start: dict, limit: Any) -> dict:
        reads = self._read()
        if reads.stopping and start:  # the driver stops gracefully: no further batch
            return start
        out: dict[str, dict[str, int]] = {
            op: self._batch_end(op, start.get(op, {}), reads) for op in self.operators
        }
        out[WARM] = {"0": 1}  # differs from the initial offset: batch 0 runs, data or not
        # Spark asks every trigger while no batch runs: a count changed meanwhile takes
        # effect now, for whatever arrives next, not at the next batch planned.
        self._record_effects(reads.active)
        self._reads, self._reads_end = reads, out
        self._start_reporter()
        return out

    def _batch_end(self, op: str, start: dict, reads: BatchReads) -> dict[str, int]:
        """Where ``op``'s partitions end this batch: from where they were processed (with
        a task window, or resumed from an older checkpoint, Spark's offsets are only a
        lower bound), at most a slot's capacity on. A lost registry (a Redis restart or
        flush) reads 0: the batch stays where it is, never rewinds to replay history.
        With overlapping windows a partition's recorded progress is where it starts even
        behind Spark's offset (as ``slots.plan_slots`` plans it), and the end moves on
        from there: while a window lags, Spark's offset waits for it."""
        cap = max_events_per_slot(
            self.settings.cost_mode,
            self._topology()[op].et_s,
            self.settings.max_batch_s,
            self.settings.max_events_per_task,
        )
        out = {}
        overlaps = self.windowed and self.settings.epoch_overlap_s > 0
        progress = reads.progress[op]
        for j in range(self._pool(op)):
            at = int(start.get(str(j), 0))
            first = max(at, progress.get(str(j), 0))
            if overlaps and str(j) in progress:  # Spark's offsets never go back
                first = int(progress[str(j)])
            out[str(j)] = max(at, first, capped_end(first, reads.ends[op][j], cap))
        return out

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        # The reads of the latestOffset that returned ``end`` are this batch's; any other
        # end (a batch replayed from the checkpoint) is read afresh.
        reads = self._reads
        if reads is None or end != self._reads_end:
            reads = self._read(with_ends=False)
        self._reads = None  # the batch's tasks run next and publish new progress
        active = reads.active
        self._record_effects(active)
        planned = {
            op: self._plan(op, start, end, active[op], reads.progress) for op in self.operators
        }
        # a fresh query's first batch, or the first this reader plans (a restart, a
        # standby's takeover, replaying the batch that was running) is short: the
        # dataplane is healthy, and the standby serving, after it
        warm = start.get(WARM, {}).get("0", 0) == 0 or not self._planned
        self._planned = True
        serve_s = self._serve_seconds(planned, warm=warm)
        tasks: list[InputPartition] = []
        grouped = {op: self._groups(op, slots) for op, slots in planned.items()}
        # a keyed operator spread over several tasks moves its partitions at a new task;
        # so does a CPU-bound one that may get more tasks: the threads of one task share
        # its process's one core
        moves_in_task = {
            op
            for op, groups in grouped.items()
            if self._owned(op)
            and len(groups) == 1
            and not (self._topology()[op].cpu_bound and self._tasks(op) > 1)
        }
        spread = {op: active[op] for op in grouped if self._owned(op) and op not in moves_in_task}
        kb = self._kb()
        pipe = self._redis().pipeline(transaction=False)
        self._moved_in_task = set()
        for op, slots in planned.items():
            groups = grouped[op]
            in_task = op in moves_in_task
            if in_task:
                self._moved_in_task.add(op)
            peers, batch = tuple(groups), uuid.uuid4().hex[:12]
            tasks.extend(
                SlotGroup(op, g, active[op], serve_s, spread, in_task, warm, peers, batch)
                for g in groups
            )
            kb.log_batch(pipe, op, self._log_entry(slots, active[op], len(groups), serve_s))
        pipe.execute()
        return tasks or [SlotGroup(self.operators[0], (), active[self.operators[0]], warm=warm)]

    def _groups(self, op: str, slots: list[Slot]) -> list[tuple[Slot, ...]]:
        stable = self.windowed and self.settings.epoch_overlap_s > 0
        groups = pack(slots, self._tasks(op), keep_idle=self.windowed, stable=stable)
        if len(self.operators) > 1:  # an idle operator plans no task in a shared query
            groups = [g for g in groups if g]
        return groups

    @staticmethod
    def _log_entry(slots: list[Slot], active: int, tasks: int, serve_s: float) -> dict:
        return {
            "active": active,
            "slots": [s.replica for s in slots if not (s.drain or s.standby)],
            "drain": [s.replica for s in slots if s.drain],
            "standby": [s.replica for s in slots if s.standby],
            "tasks": tasks,
            "serve_s": round(serve_s, 3),
            "at": time.time(),
        }

    def _plan(self, op: str, start: dict, end: dict, active: int, progress: dict) -> list[Slot]:
        s, e, pool = start.get(op, {}), end.get(op, {}), self._pool(op)
        if self._owned(op):
            stateful = bool(self._topology()[op].stateful)
            return plan_keyed_slots(s, e, pool, active, progress.get(op), op, stateful)
        overlaps = self.windowed and self.settings.epoch_overlap_s > 0
        return plan_slots(
            s, e, pool, active, progress.get(op), standby=self.windowed, from_progress=overlaps
        )

    def _serve_seconds(self, planned: dict[str, list[Slot]], warm: bool = False) -> float:
        """Windowed: every task of the batch serves as long as its longest planned slot.
        The warm-up batch (a fresh query's first) serves one checkpoint interval: the
        dataplane reports itself healthy after it, and no event waits on its length."""
        if not self.windowed:
            return 0.0
        window = self.o.task_window_s
        if warm and self.settings.checkpoint_s > 0:
            window = min(window, self.settings.checkpoint_s)
        mode = self.settings.cost_mode
        occupancy = [
            t
            for op, slots in planned.items()
            for t in planned_occupancy(slots, mode, self._topology()[op].et_s)
        ]
        return serve_seconds(window, occupancy)

    def _record_effects(self, active: dict[str, int]) -> None:
        """This batch is the first with a changed count: the change took effect now
        (elastic_sps.io.rescale_timeline). Checked only when a count differs from the previous
        batch's, and once per operator after a (re)start."""
        from elastic_sps.io.rescale_timeline import record_effect

        now = time.time()
        for op in self.operators:
            before = self._last_active.get(op)
            if active[op] != before:
                record_effect(self._redis(), self._keys(), op, active[op], now)
                if before is not None and self._topology()[op].stateful:
                    self._record_move(op, before, active[op], now)
        self._last_active = dict(active)

    def _record_move(self, op: str, before: int, after: int, now: float) -> None:
        """A keyed operator's resize at a new task; one handed over inside a running
        task was recorded by it (``handover.record_move``)."""
        if op in self._moved_in_task:
            return
        from elastic_sps.services.dataplane.handover import record_move

        record_move(self._kb(), self._topology()[op], before, after, now)

    def commit(self, end: dict) -> None:
        """The batch up to ``end`` is done: publish each operator's queue left behind and
        its active count, for the monitor. Spark calls this as a later batch starts,
        between that batch's latestOffset and partitions, so its reads are current; being
        that late, nothing a drain waits on is recorded here (``replica.publish``). A
        batch lasts an epoch, so a thread publishes the same every td in between
        (``_report_queues``)."""
        self._publish_queues(self._reads or self._read(), end)

    def _start_reporter(self) -> None:
        """The queue reporter, once per reader, from its first plan (``latestOffset``):
        the entry step's source ends are listed before its first batch commits."""
        if id(self) not in _REPORTERS:
            self._metrics_producer()  # made here, not by two threads at once
            stopped = _REPORTERS[id(self)] = threading.Event()
            threading.Thread(
                target=self._report_queues, args=(stopped,), name="sps-queues", daemon=True
            ).start()

    def stop(self) -> None:
        """The query stops: so does its queue reporter."""
        _REPORTERS.pop(id(self), threading.Event()).set()

    def _report_queues(self, stopped: threading.Event) -> None:
        """Every td until the query stops: the queues from the progress the replicas
        checkpoint. A failed read or send is said and tried again a td later."""
        from confluent_kafka import KafkaException
        from redis.exceptions import RedisError

        while not stopped.wait(self.o.td):
            try:
                self._publish_queues(self._read(), {})
            except (RedisError, KafkaException, BufferError) as exc:  # the servers, not us
                log.warning("queue levels not published: %s", exc)

    def _publish_queues(self, reads: BatchReads, end: dict) -> None:
        admitting = [op for op in self.operators if self._admits(op)]
        list_source_ends(self._redis(), self._keys(), reads, admitting)
        publish_queues(self._metrics_producer(), self.o.metrics_topic, self.o.td, reads, end)

    def _metrics_producer(self) -> Any:
        from confluent_kafka import Producer

        from elastic_sps.io.connections import kafka_config

        if self._producer is None:
            self._producer = Producer(kafka_config(self.o.bootstrap, **{"linger.ms": 0}))
        return self._producer

    # -- executor side -----------------------------------------------------------------
    def read(self, partition: InputPartition) -> Any:
        from elastic_sps.services.dataplane.task import run_group

        assert isinstance(partition, SlotGroup)
        yield from run_group(
            self.o,
            partition.operator,
            partition.slots,
            partition.active,
            partition.serve_s,
            partition.keyed_active,
            partition.moves_in_task,
            self.o.holder or None,
            partition.warm,
            (partition.peers, partition.batch),
        )
