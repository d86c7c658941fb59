"""python -m elastic_sps.services.monitor: sps.metrics -> sps.stats."""

from __future__ import annotations

from elastic_sps.contracts.base import ContractError, encode
from elastic_sps.contracts.metrics import OperatorCounters
from elastic_sps.contracts.stats import StatsRecord
from elastic_sps.io.knowledge_base import KnowledgeBase
from elastic_sps.io.redis_client import redis_client
from elastic_sps.pipeline.costs import service_topology
from elastic_sps.services.monitor.core import Closer, IntervalAggregator
from elastic_sps.services.runtime import ServiceApp, ServiceMetrics
from elastic_sps.settings import MonitorSettings, settings_or_exit


def build(settings: MonitorSettings) -> ServiceApp:
    topo = service_topology(settings)
    agg = IntervalAggregator(topo, settings.td)
    metrics = ServiceMetrics("monitor")
    svc = ServiceApp(
        "monitor",
        settings,
        metrics,
        health=lambda: {"late_records": agg.late_total, "next_interval": agg.next_to_close},
    )
    out = svc.topic(settings.topics.stats)

    async def send(rec: StatsRecord) -> None:
        await svc.send(out, str(rec.interval), encode(rec))

    closer = Closer(agg, send)

    async def flush() -> None:
        await closer.flush(settings.close_grace_s)

    async def collect(rec: OperatorCounters) -> None:
        if not agg.add(rec):
            raise ContractError(f"unknown operator {rec.operator!r}")
        await flush()

    svc.consume(settings.topics.metrics, OperatorCounters, collect)

    kb = KnowledgeBase(redis_client(settings.redis_url), settings.key_prefix)

    @svc.app.timer(interval=max(0.05, settings.td / 5))
    async def tick() -> None:
        # A silent operator (no batch yet, or an idle one) still has the replicas the
        # knowledge base says it has: take them from there, not from the minimum.
        agg.last_active.update(kb.actives(topo.operators))
        await flush()

    return svc


if __name__ == "__main__":
    build(settings_or_exit(MonitorSettings)).run()
