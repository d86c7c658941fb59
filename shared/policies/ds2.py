"""A DS2-style rate policy (Kalavri et al., OSDI 2018; the rule behind the Flink
Kubernetes operator's autoscaler).

Per operator: the true processing rate per replica (events processed per second of busy
time), the target input rate propagated from the source through the DAG with the observed
selectivities, and parallelism = ceil((target rate + backlog / catch-up time) /
(true rate × target utilisation)): DS2's rule, with the target utilisation the Flink
autoscaler adds (``job.autoscaler.target.utilization``; DS2 sizes at full utilisation).

Ours, not the paper's (it decides every policy interval, with no hold): a scale-down
takes the largest recommendation of the last ``scale_down_delay_s`` seconds and keeps at
least ``1 - max_scale_down`` of the replicas, in the shape of the Flink Kubernetes
operator's autoscaler (``job.autoscaler.scale-down.interval``, ``scale-down.max-factor``),
with our values (60 s, 0.5), not its defaults.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from elastic_sps.model.interval_stats import IntervalStats
from elastic_sps.model.topology import SOURCE, Topology
from elastic_sps.policies.base import Analysis, OperatorDecision, PolicyConfigError


@dataclass(frozen=True)
class DS2Params:
    target_utilization: float = 0.7
    catch_up_s: float = 30.0
    scale_down_delay_s: float = 60.0  # ours (see the module's text), seconds at any td
    max_scale_down: float = 0.5  # a decision keeps at least half of the replicas (ours)

    def __post_init__(self) -> None:
        if not 0 < self.target_utilization <= 1:
            raise PolicyConfigError("ds2: target_utilization must be in (0, 1]")
        if self.catch_up_s <= 0:
            raise PolicyConfigError("ds2: catch_up_s must be > 0")
        if self.scale_down_delay_s < 0:
            raise PolicyConfigError("ds2: scale_down_delay_s must be >= 0")
        if not 0 <= self.max_scale_down <= 1:
            raise PolicyConfigError("ds2: max_scale_down must be in [0, 1]")


@dataclass
class DS2:
    topology: Topology
    params: DS2Params = field(default_factory=DS2Params)
    name: str = "ds2"

    def __post_init__(self) -> None:
        # (interval start, recommendation) of the last scale_down_delay_s seconds
        self._recent: dict[str, deque[tuple[float, int]]] = {
            n: deque() for n in self.topology.names
        }

    def true_rates(self, stats: IntervalStats) -> dict[str, float]:
        """Events per second of busy time per replica; the benchmarked et when idle."""
        out = {}
        for op in self.topology.operators:
            s = stats.operators[op.name]
            out[op.name] = s.processed / s.busy_s if s.busy_s > 0 else 1.0 / op.et_s
        return out

    def target_rates(self, stats: IntervalStats) -> dict[str, float]:
        """Input rate each operator must sustain if the source's rate flows unthrottled."""
        out_rate: dict[str, float] = {SOURCE: stats.input_events / stats.td}
        target: dict[str, float] = {}
        for name in self.topology.order:
            rate = 0.0
            for e in self.topology.predecessors[name]:
                base = stats.input_events if e.src == SOURCE else stats.operators[e.src].processed
                sent = stats.operators[name].received_from.get(e.src)
                ratio = sent / base if (sent is not None and base > 0) else e.fraction
                rate += out_rate[e.src] * ratio
            target[name] = rate
            out_rate[name] = rate  # the output multiplier is applied per edge above
        return target

    def analyze(self, stats: IntervalStats) -> Analysis:
        p = self.params
        true = self.true_rates(stats)
        target = self.target_rates(stats)
        decisions = {}
        for op in self.topology.operators:
            s = stats.operators[op.name]
            current = max(1, s.active_replicas)
            need_rate = target[op.name] + s.queued / p.catch_up_s
            raw = need_rate / (true[op.name] * p.target_utilization)
            rec = max(op.min_replicas, min(op.max_replicas, math.ceil(raw - 1e-9)))
            recent = self._recent[op.name]
            now = stats.index * stats.td
            recent.append((now, rec))
            while len(recent) > 1 and recent[0][0] <= now - p.scale_down_delay_s:
                recent.popleft()
            if rec < current:
                # Scale down only with the largest recommendation of the delay window,
                # and by at most max_scale_down of the current pool.
                rec = max(r for _, r in recent)
                floor = math.ceil(current * (1 - p.max_scale_down))
                rec = max(rec, floor, op.min_replicas)
                rec = min(rec, current)
            decisions[op.name] = OperatorDecision(rec, need_rate * stats.td, raw)
        return Analysis(stats.index, stats.input_events, decisions)
