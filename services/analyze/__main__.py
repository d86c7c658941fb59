"""python -m elastic_sps.services.analyze: sps.stats -> sps.analysis."""

from __future__ import annotations

from prometheus_client import Gauge

from elastic_sps.contracts.base import encode
from elastic_sps.contracts.stats import StatsRecord
from elastic_sps.pipeline.costs import service_topology
from elastic_sps.services.analyze.core import Analyzer
from elastic_sps.services.runtime import ServiceApp, ServiceMetrics
from elastic_sps.settings import AnalyzeSettings, settings_or_exit


def build(settings: AnalyzeSettings) -> ServiceApp:
    topo = service_topology(settings)
    analyzer = Analyzer(
        topo, settings.policy, settings.predictor, latency_goal_ms=settings.latency_goal_ms
    )
    metrics = ServiceMetrics("analyze")
    predicted = Gauge(
        "sps_predicted_input_events_per_second", "λ̂_G(t+1) / td", registry=metrics.registry
    )
    observed = Gauge(
        "sps_observed_input_events_per_second", "λ_G(t) / td", registry=metrics.registry
    )
    needed = Gauge(
        "sps_needed_replicas",
        "replicas the policy asks for",
        ["operator"],
        registry=metrics.registry,
    )
    svc = ServiceApp("analyze", settings, metrics, health=lambda: {"policy": analyzer.policy.name})
    out = svc.topic(settings.topics.analysis)

    async def analyze(rec: StatsRecord) -> None:
        for result in analyzer.offer(rec):
            predicted.set(result.predicted_input / settings.td)
            observed.set(result.observed_input / settings.td)
            for n, need in result.operators.items():
                needed.labels(n).set(need.replicas)
            await svc.send(out, str(result.interval), encode(result))

    svc.consume(settings.topics.stats, StatsRecord, analyze)
    return svc


if __name__ == "__main__":
    build(settings_or_exit(AnalyzeSettings)).run()
