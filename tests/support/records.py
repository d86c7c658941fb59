"""Records tests build by hand, one way: contract records, and a consumed Kafka record as
the dataplane's per-event steps read it (for tests that drive the real steps without a
consumer between them and the broker)."""

from __future__ import annotations

import time
from collections.abc import Mapping

from elastic_sps.contracts.analysis import AnalysisRecord, OperatorNeed


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


class Record:
    """confluent-kafka's ``Message`` accessors the steps use."""

    def __init__(
        self, partition: int, offset: int, value: bytes, key: bytes | None = None, topic: str = ""
    ) -> None:
        self._p, self._o, self._v, self._k, self._t = partition, offset, value, key, topic

    def topic(self) -> str:
        return self._t

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def value(self) -> bytes:
        return self._v

    def key(self) -> bytes | None:
        return self._k

    def timestamp(self) -> tuple[int, int]:
        return (1, int(time.time() * 1000))

    def error(self) -> None:
        return None
