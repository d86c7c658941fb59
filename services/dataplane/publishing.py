"""A task's publishing, once per task: sink ids, LAS sketches and Δ replies, utilisation,
the counters, the offsets processed up to and the task's span, in one Redis pipeline and
one producer flush."""

from __future__ import annotations

import threading
import time
import zlib
from dataclasses import dataclass
from typing import Any

from elastic_sps.contracts.metrics import OperatorCounters
from elastic_sps.io.knowledge_base import Keys, KnowledgeBase
from elastic_sps.services.dataplane.cluster import executor_id
from elastic_sps.services.dataplane.group import GroupRun
from elastic_sps.services.dataplane.keyed_slot import handover_pause
from elastic_sps.services.dataplane.steps import NOT_CUT, SlotResult
from elastic_sps.services.dataplane.worker import WORKER

LAS_LOCK = threading.Lock()
DELTAS_KEPT_S = 3600  # a Δ list no gate reads any more (its worker gone) expires


@dataclass(frozen=True)
class TaskSpan:
    """When a task served (wall clock) and how many planned records it found waiting:
    beside the batch log's planning times, what a batch spends with no task serving
    (``benchmarks/bench_hops.py``)."""

    start: float
    end: float
    backlog: int

    def record(self, pipe: Any, kb: KnowledgeBase, operator: str) -> None:
        kb.log_task(pipe, operator, self.start, self.end, self.backlog)


def publish(g: GroupRun, results: list[SlotResult], span: TaskSpan | None = None) -> None:
    """Sink ids, LAS sketches and Δ replies, utilisation, the counters and the offsets
    processed up to (what a drain waits on; with a window, where the next task starts),
    the task's span at its end (not at a checkpoint), batched, the id ledger's marks
    first. Slot threads checkpoint concurrently: what they share in the worker (the LAS
    sketches) is updated under a lock."""
    pipe = g.r.pipeline(transaction=False)
    # the id ledger before the offsets: a committed event is never read again, so a
    # death between the two must find its marks in (what was not committed is read, and
    # marked, again)
    for res in results:
        if res.ids is not None:
            res.ids.write(pipe)
    done = {r.replica: r.next_offset for r in results if r.next_offset > r.start}
    uncounted = results  # whose counters go in the pipeline (not with a keyed commit)
    if g.op.stateful:  # state, offsets and counts at once, per partition (state_store.py)
        if len(pipe):
            pipe.execute()
        uncounted = commit_state(g, results)
    elif done:
        g.kb.record_committed(pipe, g.operator, done)
    if done:
        # which executor served how many slots: shows tasks spread over a cluster
        served_by = WORKER.get("exec", executor_id)
        g.kb.count_executor(pipe, g.operator, served_by)
    if span is not None:
        span.record(pipe, g.kb, g.operator)
    # the Δ replies go to the gate that admitted the events: its worker's with the entry
    # step, the ingress's otherwise
    deltas = g.admission.deltas_key if g.admission else g.keys.las_deltas(g.operator)
    las = None
    if g.operator in g.topo.entry_operators and g.o.las:
        with LAS_LOCK:
            las = WORKER.get(
                ("las", g.operator, g.keys.prefix),
                lambda: las_operator(g.r, g.operator, g.keys, deltas),
            )
    totals: dict[str, int] = {}
    admission: dict[str, int] = {}  # the entry step's fates, beside its progress
    for r in uncounted:
        _add(totals, slot_counts(r))
    for r in results:  # an entry step's slots are stateless (``las.site``): none committed
        _add(admission, r.admission)
    g.kb.add_counts(pipe, g.operator, totals)  # the dataplane's /metrics reads these
    for name, n in admission.items():
        if n:
            pipe.hincrby(g.keys.ingress_counts, name, n)
    interval = int(time.time() // g.td)
    metrics_topic = g.o.metrics_topic
    active = g.current_active()
    for res in results:
        if res.marks is not None:  # a stateless partition's watermarks, with its offset
            res.marks.write(g.r, pipe)
        if res.probes:  # to the gate that admitted them
            pipe.rpush(deltas, *res.probes)
            pipe.expire(deltas, DELTAS_KEPT_S)
        share = min(1.0, res.processed * g.op.et_s / g.td)
        g.kb.record_utilisation(pipe, g.operator, res.replica, share)
        if las is not None and res.las_keys:
            import numpy as np

            with LAS_LOCK:
                las.update_batch(
                    np.asarray(res.las_keys, dtype=np.int64), np.asarray(res.las_times)
                )
        if res.keyed is not None and res.keyed.fenced:
            continue  # its events are counted by the attempt that overtook it
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
            members_dead_lettered=res.members_dead,
            incomplete=res.incomplete,
            expired=res.expired,
            active_replicas=active,
            latency_ms=res.latencies.values,
            queuing_ms=res.queuing.values,
            latency_ms_sum=res.latencies.total,
            latency_n=res.latencies.n,
            queuing_ms_sum=res.queuing.total,
            queuing_n=res.queuing.n,
        )
        g.producer.produce(metrics_topic, rec.model_dump_json().encode(), partition=0)
    pipe.execute()
    if span is not None:  # a task's end; inside it the counters go in the background
        g.producer.p.flush(10)
    else:
        g.producer.p.poll(0)


def slot_counts(res: SlotResult) -> dict[str, int]:
    """What a slot's events came to, for the operator's counters (``Keys.counts``)."""
    return {
        "processed": res.processed,
        "expired": res.expired,
        "dead": res.dead + res.members_dead,
        "late": res.late,
        "fired": res.fired,
        "repeats": res.repeats,
        "state_expired": res.state_expired,
    }


def _add(into: dict[str, int], counts: dict[str, int]) -> None:
    for name, n in counts.items():
        into[name] = into.get(name, 0) + n


def commit_state(g: GroupRun, results: list[SlotResult]) -> list[SlotResult]:
    """Each partition's state with the offset it reflects and the counts of what its
    events did (applied with the commit or not at all: a fenced attempt's events are
    counted by the attempt that overtook it); a partition whose owner changed records
    how long its events waited for the move (``handover_pause``). Returns the results
    with no commit of their own, whose counts the caller adds."""
    uncounted = []
    for res in results:
        keyed = res.keyed
        if keyed is None:
            uncounted.append(res)
            continue
        if keyed.fenced:
            continue
        if keyed.first_at is not None:
            gap = handover_pause(keyed.store, keyed.owner, keyed.first_at)
            if gap is not None:
                g.kb.record_pause(g.operator, keyed.partition, *gap, keyed.first_at)
                keyed.store.handover = None  # the task's hand-over, counted once per epoch
        # a cut's commit was decided at the cut: the store has buffered more since
        prepared = keyed.due(res.start, res.next_offset) if res.commit is NOT_CUT else res.commit
        if prepared is None:
            if not keyed.fenced:
                uncounted.append(res)
            continue
        prepared.count(g.keys.counts(g.operator), slot_counts(res))
        keyed.apply(prepared)
    return uncounted


def las_operator(r: Any, operator: str, keys: Keys, deltas_key: str | None = None) -> Any:
    from elastic_sps.las.operator_side import LasOperator
    from elastic_sps.las.redis_store import SketchPublisher

    pub = SketchPublisher(r, operator, keys, deltas_key)
    return LasOperator(pub.publish_sketch, pub.send_delta, seed=zlib.crc32(operator.encode()))
