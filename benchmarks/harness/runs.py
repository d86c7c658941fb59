"""How a comparison runs: the engines alternating run by run, each run on a pipeline of
its own with one collector and one producer, the input paced or at once, and one report
(``--json``: ``{"rows", "summary"}``; else a row a line, then the summary)."""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from confluent_kafka import Producer

from benchmarks.harness.broker import jit_seconds
from benchmarks.harness.collector import Collector
from benchmarks.harness.engines import Pipeline
from benchmarks.harness.machine import SpeedProbe
from benchmarks.harness.summary import lines

T = TypeVar("T")
Row = dict[str, Any]


def names(csv: str) -> list[str]:
    """A comma-separated flag's entries (``--peers``, ``--queries``)."""
    return [p.strip() for p in csv.split(",") if p.strip()]


def fresh_tag(prefix: str) -> str:
    """A run's own prefix for its topics, keys and consumer groups."""
    return f"{prefix}{uuid.uuid4().hex[:6]}"


def producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})


def paced(items: Sequence[T], rate: float | None) -> Iterator[tuple[int, T]]:
    """Each item with its index, the k-th at k / ``rate`` seconds from the first (``rate``
    None: at once)."""
    t0 = time.monotonic()
    for k, item in enumerate(items):
        if rate:
            ahead = t0 + k / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        yield k, item


@contextmanager
def running(pipe: Pipeline, bootstrap: str) -> Iterator[tuple[Collector, Producer]]:
    """A collector on the pipeline's output and a producer for its input; on the way out
    the collector and the pipeline stop."""
    collector = Collector(bootstrap, pipe.dst)
    collector.start()
    try:
        yield collector, producer(bootstrap)
    finally:
        collector.stop()
        pipe.stop()


def alternating(
    runs: int, peers: Sequence[str], cases: Sequence[T]
) -> Iterator[tuple[int, T, str]]:
    """(run, case, peer): every case each run, the peers' order reversed every other run
    so that neither always goes first on a warmer machine."""
    for run in range(runs):
        for case in cases:
            for peer in peers if run % 2 == 0 else list(reversed(peers)):
                yield run, case, peer


def run_all(
    measure: Callable[[str, dict[str, str]], Row],
    peers: Sequence[str],
    cases: Sequence[dict[str, str]],
    runs: int,
    quiet: bool,
    broker: int | None = None,
    warm_runs: int = 0,
    probe: SpeedProbe | None = None,
) -> list[Row]:
    """Every run's row, printed as it comes (``quiet``: on stderr, so that stdout carries
    only the JSON report). A run that raises RuntimeError is a row with its ``error``:
    said, not hidden, and not summed. ``broker``: the local broker's pid, whose JIT
    compile seconds over the run each row then carries (``broker_jit_s``).
    ``warm_runs``: rounds of every peer first, printed (a negative ``run``), not returned.
    ``probe``: the machine's speed probe; a row's ``phase`` (wall times (start, end) of
    its CPU figure's phase) becomes the probe's median unit over it (``probe_ms``)."""
    rows = []
    for run, case, peer in alternating(warm_runs + runs, peers, cases):
        jit0 = jit_seconds(broker)
        try:
            row = {**measure(peer, case), "run": run - warm_runs}
        except RuntimeError as exc:
            row = {"peer": peer, **case, "run": run - warm_runs, "error": str(exc)}
        phase = row.pop("phase", None)
        if probe is not None and phase is not None:
            row["probe_ms"] = probe.median_between(*phase)
        jit1 = jit_seconds(broker)
        if jit0 is not None and jit1 is not None:
            row["broker_jit_s"] = round(jit1 - jit0, 2)
        if run >= warm_runs:
            rows.append(row)
        print(json.dumps(row), file=sys.stderr if quiet else sys.stdout, flush=True)
    return rows


def report(rows: list[Row], summed: list[Row], as_json: bool) -> None:
    if as_json:
        print(json.dumps({"rows": rows, "summary": summed}))
        return
    for line in lines(summed):
        print(line)
