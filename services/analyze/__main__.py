"""python -m services.analyze: sps.stats -> sps.analysis."""

from __future__ import annotations

from typing import Any

from prometheus_client import Gauge

from services.analyze.core import Analyzer
from services.runtime import ServiceApp, ServiceMetrics
from shared import topology
from shared.contracts.base import ContractError, decode, encode
from shared.contracts.stats import StatsRecord
from shared.settings import AnalyzeSettings, settings_or_exit


def build(settings: AnalyzeSettings) -> ServiceApp:
    topo = topology.load(settings.topology)
    analyzer = Analyzer(topo, settings.policy, settings.predictor)
    metrics = ServiceMetrics("analyze")
    predicted = Gauge("sps_predicted_input_events", "λ̂_G(t+1)", registry=metrics.registry)
    observed = Gauge("sps_observed_input_events", "λ_G(t)", registry=metrics.registry)
    needed = Gauge(
        "sps_needed_replicas",
        "replicas the policy asks for",
        ["operator"],
        registry=metrics.registry,
    )
    svc = ServiceApp("analyze", settings, metrics, health=lambda: {"policy": analyzer.policy.name})
    src = svc.topic(settings.topics.stats)
    out = svc.topic(settings.topics.analysis)

    @svc.app.agent(src)
    async def analyze(stream: Any) -> None:
        async for event in stream.events():
            svc.consumed(settings.topics.stats)
            try:
                results = analyzer.offer(decode(event.value, StatsRecord))
            except (ContractError, ValueError) as exc:
                await svc.dead_letter(event, str(exc))
                continue
            for result in results:
                await publish(result)

    async def publish(result: Any) -> None:
        predicted.set(result.predicted_input)
        observed.set(result.observed_input)
        for n, need in result.operators.items():
            needed.labels(n).set(need.replicas)
        await svc.send(out, str(result.interval), encode(result))

    return svc


if __name__ == "__main__":
    build(settings_or_exit(AnalyzeSettings)).run()
