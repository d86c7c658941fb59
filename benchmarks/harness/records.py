"""A consumed Kafka record built in memory: the accessors of confluent-kafka's
``Message`` the dataplane's per-event steps read, for driving the real steps without a
consumer between them and the broker (``bench_steps.py``, and the tests that do)."""

from __future__ import annotations

import time


class Record:
    __slots__ = ("_k", "_o", "_p", "_t", "_ts", "_v")

    def __init__(
        self,
        partition: int,
        offset: int,
        value: bytes,
        key: bytes | None = None,
        topic: str = "",
        ts_ms: int | None = None,
    ) -> None:
        """``ts_ms``: the record's produce time (None: whenever it is asked, now)."""
        self._p, self._o, self._v, self._k, self._t, self._ts = (
            partition, offset, value, key, topic, ts_ms,
        )  # fmt: skip

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
        return (1, int(time.time() * 1000) if self._ts is None else self._ts)

    def error(self) -> None:
        return None
