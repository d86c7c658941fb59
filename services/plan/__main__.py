"""python -m services.plan: sps.analysis -> sps.plans."""

from __future__ import annotations

from typing import Any

from services.plan.core import Planner
from services.runtime import ServiceApp, ServiceMetrics
from shared import topology
from shared.contracts.analysis import AnalysisRecord
from shared.contracts.base import ContractError, decode, encode
from shared.settings import PlanSettings, settings_or_exit


def build(settings: PlanSettings) -> ServiceApp:
    planner = Planner(topology.load(settings.topology), settings.budget)
    svc = ServiceApp("plan", settings, ServiceMetrics("plan"))
    src = svc.topic(settings.topics.analysis)
    out = svc.topic(settings.topics.plans)

    @svc.app.agent(src)
    async def plan(stream: Any) -> None:
        async for event in stream.events():
            svc.consumed(settings.topics.analysis)
            try:
                rec = planner.plan(decode(event.value, AnalysisRecord))
            except (ContractError, ValueError) as exc:
                await svc.dead_letter(event, str(exc))
                continue
            await svc.send(out, rec.plan_id, encode(rec))

    return svc


if __name__ == "__main__":
    build(settings_or_exit(PlanSettings)).run()
