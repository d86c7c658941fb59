"""python -m elastic_sps.services.plan: sps.analysis -> sps.plans."""

from __future__ import annotations

from elastic_sps.contracts.analysis import AnalysisRecord
from elastic_sps.contracts.base import encode
from elastic_sps.pipeline.costs import service_topology
from elastic_sps.services.plan.core import Planner, decisions
from elastic_sps.services.runtime import ServiceApp, ServiceMetrics
from elastic_sps.settings import PlanSettings, settings_or_exit


def build(settings: PlanSettings) -> ServiceApp:
    planner = Planner(
        service_topology(settings),
        settings.budget,
        settings.stabilisation(),
        settings.latency_goal_ms,
        settings.cores_or_local(),
    )
    svc = ServiceApp("plan", settings, ServiceMetrics("plan"))
    out = svc.topic(settings.topics.plans)
    explained = svc.topic(settings.topics.decisions)

    async def plan(rec: AnalysisRecord) -> None:
        p = planner.plan(rec)
        await svc.send(out, p.plan_id, encode(p))
        for d in decisions(planner.topology, rec, p, settings.dry_run):
            await svc.send(explained, d.operator, encode(d))

    svc.consume(settings.topics.analysis, AnalysisRecord, plan)
    return svc


if __name__ == "__main__":
    build(settings_or_exit(PlanSettings)).run()
