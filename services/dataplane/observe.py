"""The dataplane's ``/metrics`` and ``/health``, served by the driver process.

The replicas run in Spark's Python workers and the stream reader in a Python process of
its own, so neither can hold the driver's registry: what they know is in Redis (active
counts, partition ends and committed offsets, measured et, the per-operator counts each
task adds in ``replica.publish``) and in the queries' progress. A custom collector reads
both at scrape time, so a scrape always shows the current state and nothing is kept twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from elastic_sps.io import rescale_timeline
from elastic_sps.io.knowledge_base import Keys, KnowledgeBase

log = logging.getLogger("sps.dataplane")
COUNTS = ("processed", "expired", "dead")
# the metric of each count: one spelling of "dead-lettered" across the services
METRIC_OF = {"processed": "processed", "expired": "expired", "dead": "dead_lettered"}


class DataplaneCollector(Collector):
    """Per operator: events processed / expired / dead-lettered, queue, measured et,
    active replicas; per query: the last batch's duration and the batches run; the
    rescale timeline's decision-to-effect histogram."""

    def __init__(self, r: Any, keys: Keys, topo: Any, queries: Callable[[], list[Any]]) -> None:
        self.r, self.keys, self.topo, self.queries = r, keys, topo, queries
        self.kb = KnowledgeBase(r, keys)

    @staticmethod
    def _operator_families() -> dict[str, Any]:
        label = ["operator"]
        fams: dict[str, Any] = {
            c: CounterMetricFamily(
                f"sps_dataplane_{METRIC_OF[c]}",
                f"events {METRIC_OF[c]} by the replicas",
                labels=label,
            )
            for c in COUNTS
        }
        fams["queue"] = GaugeMetricFamily(
            "sps_dataplane_queue_events", "events waiting", labels=label
        )
        fams["et"] = GaugeMetricFamily(
            "sps_dataplane_et_seconds",
            "execution time per event (measured, else declared)",
            labels=label,
        )
        fams["active"] = GaugeMetricFamily(
            "sps_dataplane_active_replicas", "active replicas", labels=label
        )
        return fams

    @staticmethod
    def _query_families() -> dict[str, Any]:
        return {
            "seconds": GaugeMetricFamily(
                "sps_dataplane_batch_seconds", "the last micro-batch's duration", labels=["query"]
            ),
            "batches": CounterMetricFamily(
                "sps_dataplane_batches", "micro-batches run", labels=["query"]
            ),
        }

    @staticmethod
    def _effect_family(histogram: tuple[list[tuple[str, float]], float]) -> Metric:
        buckets, total = histogram
        return HistogramMetricFamily(
            "sps_rescale_decision_to_effect_seconds",
            "plan decided -> first micro-batch with the new count, per change",
            buckets=buckets,
            sum_value=total,
        )

    def describe(self) -> Iterator[Metric]:
        """The names without touching Redis (prometheus_client calls this on register)."""
        yield from self._operator_families().values()
        yield from self._query_families().values()
        yield self._effect_family(rescale_timeline.histogram([]))

    def collect(self) -> Iterator[Metric]:
        fams = self._operator_families()
        for op in self.topo.operators:
            counts = self.kb.counts(op.name)
            for c in COUNTS:
                fams[c].add_metric([op.name], float(counts.get(c, 0)))
            backlog = self.kb.backlog(op.name, op.max_replicas)
            fams["queue"].add_metric([op.name], sum(backlog))
            et = self.kb.et_ms(op.name)
            et = et if et is not None else op.et_ms
            fams["et"].add_metric([op.name], et / 1000.0 if et is not None else float("nan"))
            fams["active"].add_metric([op.name], float(self.kb.active(op)))
        yield from fams.values()
        batch = self._query_families()
        for q in self.queries():
            progress = q.lastProgress or {}
            duration_ms = progress.get("durationMs", {}).get("triggerExecution", 0)
            batch["seconds"].add_metric([q.name], duration_ms / 1000)
            batch["batches"].add_metric([q.name], float(progress.get("batchId", -1) + 1))
        yield from batch.values()
        yield self._effect_family(rescale_timeline.read_histogram(self.r, self.keys))


def serving(r: Any, keys: Keys, holder: str, queries: list[Any]) -> bool:
    """Whether a task of ``holder``'s query (a dataplane process's lease id) past the
    warm-up batch has started serving (``Keys.tasks_serving``), or every query waits for
    data: Spark plans a batch only once there is some, so an idle pipeline serves by
    waiting."""
    if r.sismember(keys.tasks_serving, holder):
        return True
    return all(_waiting(q.status or {}) for q in queries)


def _waiting(status: dict[str, Any]) -> bool:
    return not status.get("isDataAvailable") and not status.get("isTriggerActive")


def health(
    r: Any, queries: Callable[[], list[Any]], serving: Callable[[], bool] = lambda: True
) -> tuple[bool, dict[str, Any]]:
    """OK when every query runs, has finished its first (warm-up) batch, serves
    (``serving``, e.g. the function ``serving`` above), and Redis answers."""
    running = {q.name: bool(q.isActive) and q.lastProgress is not None for q in queries()}
    try:
        redis_ok = bool(r.ping())
        tasks = redis_ok and serving()
    except Exception:  # any failure to reach Redis is "not healthy", reported, not raised
        redis_ok = tasks = False
    ok = redis_ok and tasks and bool(running) and all(running.values())
    return ok, {
        "service": "dataplane",
        "status": "ok" if ok else "degraded",
        "redis": redis_ok,
        "serving": tasks,
        "queries": running,
    }


class Observed:
    """What the dataplane's /health says from the process's first moment (the server
    starts before anything else, so ``up``'s watch hears a process that waits or boots):
    "starting" while it waits for another holder's first batch (``phase`` "waiting", a
    restarted process) or boots Spark and its queries (``phase`` "starting"); once
    ``running`` gives it the queries, the holder's ``health`` ("starting" still while
    its queries run but have not all finished a batch and served), or, not holding the
    lease, a warm "standby" (healthy)."""

    def __init__(self, r: Any, keys: Keys, lease: Any, task_window_s: float) -> None:
        self.r, self.keys, self.lease, self.task_window_s = r, keys, lease, task_window_s
        self.phase = "waiting"
        self.queries: Callable[[], list[Any]] | None = None
        self.registry = CollectorRegistry()

    def running(self, topo: Any, queries: Callable[[], list[Any]]) -> None:
        """The pipeline's metrics on /metrics, the queries' health on /health."""
        self.registry.register(DataplaneCollector(self.r, self.keys, topo, queries))
        self.queries = queries

    def state(self) -> tuple[bool, dict[str, Any]]:
        queries = self.queries
        if queries is not None and self.lease.held:
            ok, said = health(self.r, queries, lambda: self._serves(queries))
            if not ok and said["redis"] and all(q.isActive for q in queries()):
                said["status"] = "starting"  # before its first batch, or before it serves
            return ok, said
        # not the holder, warm: a standby (also in a first start's moment before it takes
        # the lease, which `up` and the tests take as ready, as before)
        if queries is not None:
            return True, {"service": "dataplane", "status": "standby"}
        return False, {"service": "dataplane", "status": "starting", "phase": self.phase}

    def _serves(self, queries: Callable[[], list[Any]]) -> bool:
        # planned ranges only (no epochs): a task runs only while there is data to read
        return self.task_window_s <= 0 or serving(self.r, self.keys, self.lease.me, queries())
