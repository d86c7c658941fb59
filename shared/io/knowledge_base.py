"""The Redis key layout of the knowledge base (the K of MAPE-K).

Every key lives under one configurable prefix; this module is the only place that spells
them, so a service written by someone else finds the same keys.

| key                                   | type   | written by          | read by                |
|---------------------------------------|--------|---------------------|------------------------|
| {p}:op:{op}:active                    | int    | execute             | dataplane, ingress     |
| {p}:op:{op}:pool                      | int    | execute (at start)  | dataplane, plan        |
| {p}:op:{op}:et_ms                     | float  | execute (benchmark) | analyze, ingress       |
| {p}:op:{op}:util                      | hash   | dataplane           | dataplane (grouping)   |
| {p}:op:{op}:rescale                   | hash   | execute, dataplane  | dataplane (timeline)   |
| {p}:dp:rescales                       | list   | dataplane           | reports, /metrics      |
| {p}:plan:last_interval                | int    | execute             | execute (ordering)     |
| {p}:plan:short                        | string | execute             | ingress (LAS gate)     |
| {p}:plan:applied                      | set    | execute             | execute                |
| {p}:heartbeat:{service}               | float  | every service       | `elastic-sps up`       |
| {p}:las:{op}:sketch                   | hash   | dataplane operator  | ingress shedder        |
| {p}:las:{op}:deltas                   | list   | dataplane operator  | ingress shedder        |
| {p}:las:{op}:sync                     | float  | ingress shedder     | dataplane operator     |
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Keys:
    prefix: str = "sps"

    def topic(self, op: str) -> str:
        """The operator's Kafka topic in this run's namespace."""
        from shared.io.topics import Topics

        return Topics.operator(op, self.prefix)

    def active(self, op: str) -> str:
        return f"{self.prefix}:op:{op}:active"

    def pool(self, op: str) -> str:
        return f"{self.prefix}:op:{op}:pool"

    def et_ms(self, op: str) -> str:
        return f"{self.prefix}:op:{op}:et_ms"

    def committed(self, op: str) -> str:
        """Hash partition -> offset up to which the operator's replicas have processed."""
        return f"{self.prefix}:dp:{op}:committed"

    def rescale(self, op: str) -> str:
        """The operator's last change of count: plan, from, to, decided/applied/effect."""
        return f"{self.prefix}:op:{op}:rescale"

    @property
    def rescale_log(self) -> str:
        """Every change that took effect, oldest first (shared.io.rescale_timeline)."""
        return f"{self.prefix}:dp:rescales"

    @property
    def rescale_histogram(self) -> str:
        """Decision -> effect seconds of every change: cumulative bucket counts and sum."""
        return f"{self.prefix}:dp:rescales:histogram"

    def utilisation(self, op: str) -> str:
        return f"{self.prefix}:op:{op}:util"

    @property
    def last_plan(self) -> str:
        """The newest interval whose plan was applied."""
        return f"{self.prefix}:plan:last_interval"

    @property
    def plan_short(self) -> str:
        """The last periodic plan's short operators, comma-separated ("" if none)."""
        return f"{self.prefix}:plan:short"

    @property
    def applied_plans(self) -> str:
        return f"{self.prefix}:plan:applied"

    def heartbeat(self, service: str) -> str:
        return f"{self.prefix}:heartbeat:{service}"

    def las_sketch(self, op: str) -> str:
        return f"{self.prefix}:las:{op}:sketch"

    def las_deltas(self, op: str) -> str:
        return f"{self.prefix}:las:{op}:deltas"

    def las_sync(self, op: str) -> str:
        return f"{self.prefix}:las:{op}:sync"
