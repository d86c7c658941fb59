"""Records tests build by hand, one way: contract records, and a consumed Kafka record as
the dataplane's per-event steps read it (for tests that drive the real steps without a
consumer between them and the broker)."""

from __future__ import annotations

from collections.abc import Mapping

from benchmarks.harness.records import Record
from elastic_sps.contracts.analysis import AnalysisRecord, OperatorNeed

__all__ = ["Record", "analysis_record"]


def analysis_record(
    interval: int,
    needs: Mapping[str, OperatorNeed],
    policy: str = "pa-sps:basic",
    predicted_input: float = 0.0,
    closed_at: float = 0.0,
) -> AnalysisRecord:
    return AnalysisRecord(
        interval=interval,
        td=1.0,
        policy=policy,
        observed_input=predicted_input,
        predicted_input=predicted_input,
        operators=dict(needs),
        closed_at=closed_at,
    )
