"""The one reader of a run's output topic, for every engine: each record with the time it
was read here, and each event id's first arrival."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from types import TracebackType
from typing import Any, Protocol

from confluent_kafka import Consumer

from elastic_sps.io.kafka_io import take_ready

# after every window has a row, how much longer its other rows may take: one window's
# rows can sit in several partitions of the sink's topic and be read apart
ROWS_SETTLE_S = 2.0


class Running(Protocol):
    def alive(self) -> bool: ...


def unwrap(value: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """An output record's event id, if it carries one, and its row. elastic-sps's sink
    writes ``{"id", "value"}`` (an envelope on an operator's topic carries ``id`` beside
    its own fields); the peers' stateless chain carries ``_meta``; a peer's Nexmark row
    is the row itself."""
    if "_meta" in value:
        return str(value["_meta"]["id"]), value
    if set(value) == {"id", "value"}:
        return str(value["id"]), value["value"]
    return (str(value["id"]) if "id" in value else None), value


class Collector(threading.Thread):
    """Reads ``topic`` from the start until stopped. ``rows``: every record's row with
    when it was read, in order; ``seen``: each id's first read time; ``first``: the row
    that came with it."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.rows: list[tuple[float, dict[str, Any]]] = []
        self.seen: dict[str, float] = {}
        self.first: dict[str, dict[str, Any]] = {}
        self.halt = threading.Event()
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": uuid.uuid4().hex,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        self.consumer.subscribe([topic])

    def run(self) -> None:
        while not self.halt.is_set():
            # as soon as a record is there: consume(n, timeout) alone waits its whole
            # timeout at a trickle, and that wait would count in every latency
            for m in take_ready(self.consumer, 1000, 0.05):
                if not m.error():
                    self.note(json.loads(m.value()), time.time())
        self.consumer.close()

    def note(self, value: dict[str, Any], at: float) -> None:
        key, row = unwrap(value)
        self.rows.append((at, row))
        if key is not None and key not in self.seen:
            self.seen[key] = at
            self.first[key] = row

    def stop(self) -> None:
        self.halt.set()
        self.join(10)

    def __enter__(self) -> Collector:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _wait(
        self, missing: Callable[[], int], of: str, pipe: Running | None, timeout: float
    ) -> None:
        """Until ``missing()`` is 0; a RuntimeError if the pipeline dies or time runs out
        (``pipe`` None: no error, the caller counts what is missing)."""
        deadline = time.monotonic() + timeout
        while (left := missing()) > 0:
            if time.monotonic() > deadline or (pipe is not None and not pipe.alive()):
                if pipe is None:
                    return
                raise RuntimeError(f"{left} of {of} missing")
            time.sleep(0.05)

    def wait_for(self, ids: Collection[str], pipe: Running, timeout: float) -> float:
        """Wait until every id has been seen; the last one's time."""

        def missing() -> int:
            return sum(i not in self.seen for i in ids)

        self._wait(missing, f"{len(ids)} outputs", pipe, timeout)
        return max(self.seen[i] for i in ids)

    def wait_for_count(self, n: int, timeout: float) -> None:
        """Wait until ``n`` ids have been seen or ``timeout`` passes, whichever is first."""
        self._wait(lambda: n - len(self.seen), f"{n} outputs", None, timeout)

    def wait_for_windows(
        self, windows: Collection[int] | Mapping[int, int], pipe: Running, timeout: float
    ) -> float:
        """Wait until every window (by ``window_start``) has a row; with ``windows`` a
        count of the rows each should have (the reference's), up to ``ROWS_SETTLE_S``
        more until each has that many distinct rows (whether they are right is the
        benchmark's to judge: one judged on part of its rows would look wrong). The time
        the last was read."""
        if not windows:
            raise SystemExit("a phase closes no window: give it more --events or --seconds")

        def missing() -> int:
            got = Counter(r["window_start"] for _, r in list(self.rows))
            return sum(1 for w in windows if not got[w])

        self._wait(missing, f"{len(windows)} windows", pipe, timeout)
        if isinstance(windows, Mapping):
            self._wait(lambda: self._short(windows), "", None, ROWS_SETTLE_S)
        return max(t for t, r in list(self.rows) if r["window_start"] in windows)

    def _short(self, rows_of: Mapping[int, int]) -> int:
        """How many windows hold fewer distinct rows than ``rows_of`` says."""
        got: dict[int, set[str]] = {}
        for _, r in list(self.rows):
            if r["window_start"] in rows_of:
                got.setdefault(r["window_start"], set()).add(json.dumps(r, sort_keys=True))
        return sum(1 for w, n in rows_of.items() if len(got.get(w, ())) < n)
