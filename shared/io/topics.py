"""Topic names (overridable through settings) and the embedded-mode topic list."""

from __future__ import annotations

from pydantic import BaseModel


class Topics(BaseModel):
    ingress: str = "sps.ingress"
    metrics: str = "sps.metrics"
    stats: str = "sps.stats"
    analysis: str = "sps.analysis"
    plans: str = "sps.plans"
    requests: str = "sps.requests"
    actions: str = "sps.actions"
    deadletter: str = "sps.deadletter"
    shed: str = "sps.shed"
    decisions: str = "sps.decisions"

    def control(self) -> list[str]:
        return [
            self.metrics,
            self.stats,
            self.analysis,
            self.plans,
            self.requests,
            self.actions,
            self.deadletter,
            self.shed,
            self.decisions,
            self.ingress,
        ]

    @staticmethod
    def operator(name: str, prefix: str = "sps") -> str:
        """An operator's topic, namespaced by the run's key prefix so a new run on an old
        broker never reads an earlier run's events (the default prefix keeps the plain
        ``sps.op.<name>``)."""
        return f"sps.op.{name}" if prefix == "sps" else f"sps.op.{prefix}.{name}"
