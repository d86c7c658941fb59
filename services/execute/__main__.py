"""python -m elastic_sps.services.execute: sps.plans and sps.requests -> Redis, sps.actions."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import redis
from prometheus_client import Gauge, Histogram

from elastic_sps.contracts.action import ActionRecord
from elastic_sps.contracts.base import encode
from elastic_sps.contracts.plan import PlanRecord, RescaleRequest
from elastic_sps.io.redis_client import redis_client
from elastic_sps.pipeline.costs import service_topology
from elastic_sps.services.execute.core import Executor
from elastic_sps.services.runtime import ServiceApp, ServiceMetrics
from elastic_sps.settings import ExecuteSettings, settings_or_exit

log = logging.getLogger("elastic_sps.services.execute")


def build(settings: ExecuteSettings) -> ServiceApp:
    topo = service_topology(settings)
    # no client-side retries: execute retries whole requests itself (redis_retry_max_s)
    client = redis_client(settings.redis_url, timeout_s=2, retries=0)
    state = {"redis_ok": True}
    metrics = ServiceMetrics("execute")
    reg = metrics.registry
    replicas = Gauge("sps_active_replicas", "active replicas written", ["operator"], registry=reg)
    redis_up = Gauge("sps_redis_up", "1 when the last Redis call worked", registry=reg)
    latency = Histogram(
        "sps_plan_latency_seconds",
        "interval close -> replicas in Redis",
        registry=reg,
        buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5),
    )
    svc = ServiceApp(
        "execute",
        settings,
        metrics,
        health=lambda: {
            "status": "ok" if state["redis_ok"] else "degraded",
            "redis": state["redis_ok"],
        },
    )
    executor = Executor(client, topo, svc.keys, settings.stela_machine_slots)
    actions = svc.topic(settings.topics.actions)

    async def with_redis(fn: Any, *args: Any) -> Any:
        """Retry with exponential backoff until Redis answers; never report a plan as
        applied that was not written."""
        delay = 0.1
        while True:
            try:
                result = fn(*args)
                state["redis_ok"] = True
                redis_up.set(1)
                return result
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                state["redis_ok"] = False
                redis_up.set(0)
                log.warning("redis unreachable (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, settings.redis_retry_max_s)

    async def apply(plan: PlanRecord) -> None:
        if settings.dry_run:
            log.info("dry run: would apply %s (plan %s)", plan.targets, plan.plan_id)
            action = ActionRecord(
                plan_id=plan.plan_id,
                status="dry-run",
                previous=await with_redis(executor.current),
                targets=dict(plan.targets),
                applied_at=time.time(),
            )
            await svc.send(actions, plan.plan_id, encode(action))
            return
        action = await with_redis(executor.apply, plan)
        if action.status == "applied":
            for n, v in action.targets.items():
                replicas.labels(n).set(v)
            if action.plan_latency_s is not None:
                latency.observe(action.plan_latency_s)
        await svc.send(actions, plan.plan_id, encode(action))

    @svc.app.task
    async def bootstrap() -> None:
        await with_redis(executor.bootstrap)

    async def on_demand(req: RescaleRequest) -> None:
        await apply(await with_redis(executor.plan_for_request, req))

    svc.consume(settings.topics.plans, PlanRecord, apply)
    svc.consume(settings.topics.requests, RescaleRequest, on_demand)

    return svc


if __name__ == "__main__":
    build(settings_or_exit(ExecuteSettings)).run()
