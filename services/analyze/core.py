"""Analyze: a statistics record in, the policy's analysis out (any policy by name)."""

from __future__ import annotations

from elastic_sps.contracts.analysis import AnalysisRecord, OperatorNeed
from elastic_sps.contracts.base import ContractError
from elastic_sps.contracts.stats import StatsRecord
from elastic_sps.model.topology import Topology
from elastic_sps.policies import Policy, make_policy


class Analyzer:
    """The policy sees intervals in order, each once. Records that arrive out of order are
    held (up to ``max_hold`` intervals past a gap, then the gap is skipped); replays of
    intervals already analysed are dropped."""

    def __init__(
        self,
        topology: Topology,
        policy: str,
        predictor: str | None = None,
        max_hold: int = 3,
        latency_goal_ms: float | None = None,
    ) -> None:
        spec = f"pa-sps:{predictor}" if policy == "pa-sps" and predictor else policy
        self.topology = topology
        self.policy: Policy = make_policy(spec, topology, latency_goal_ms=latency_goal_ms)
        self.last_interval: int | None = None
        self.max_hold = max_hold
        self._held: dict[int, StatsRecord] = {}
        self.skipped = 0

    def offer(self, rec: StatsRecord) -> list[AnalysisRecord]:
        missing = set(self.topology.names) - set(rec.operators)
        if missing:
            raise ContractError(
                f"stats for interval {rec.interval} lack operators {sorted(missing)}"
            )
        if self.last_interval is not None and rec.interval <= self.last_interval:
            return []
        self._held[rec.interval] = rec
        out = []
        while self._held:
            nxt = (self.last_interval + 1) if self.last_interval is not None else min(self._held)
            if nxt not in self._held:
                if max(self._held) - nxt < self.max_hold:
                    break
                self.skipped += 1
                nxt = min(self._held)
            out.append(self._analyze(self._held.pop(nxt)))
        return out

    def _analyze(self, rec: StatsRecord) -> AnalysisRecord:
        self.last_interval = rec.interval
        analysis = self.policy.analyze(rec.to_interval_stats())
        ops = {
            n: OperatorNeed(
                replicas=d.replicas,
                predicted_load=d.predicted_load,
                current=rec.operators[n].active_replicas,
                raw_replicas=d.raw_replicas,
                inputs=dict(d.inputs),
                rule=d.rule,
                queued=max(0.0, rec.operators[n].queued),
                et_s=max(0.0, rec.operators[n].et_ms) / 1000.0,
            )
            for n, d in analysis.operators.items()
        }
        return AnalysisRecord(
            interval=rec.interval,
            td=rec.td,
            policy=self.policy.name,
            predicted_input=analysis.predicted_input,
            observed_input=rec.input_events,
            operators=ops,
            closed_at=rec.closed_at,
        )
