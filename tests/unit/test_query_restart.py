"""The dataplane restarts a query that failed transiently and fails on anything else
(the restart logic alone; the queries are stand-ins, the real ones run in the
integration tests)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from elastic_sps.model import topology
from elastic_sps.services.dataplane import job
from elastic_sps.settings import DataplaneSettings

pytestmark = pytest.mark.unit


@dataclass
class StoppedQuery:
    error: str | None
    name: str = "op_ops"
    isActive: bool = False
    lastProgress: dict | None = None  # stopped before its first batch ended

    def exception(self) -> str | None:
        return self.error


def test_a_worker_timeout_restarts_the_query_then_a_bug_fails_the_dataplane(monkeypatch):
    monkeypatch.setattr(job.time, "sleep", lambda s: None)
    started = []
    later = [
        StoppedQuery("Python worker failed to connect back."),
        StoppedQuery("ZeroDivisionError"),
    ]

    def start_query(spark, settings, topo, ops, holder=""):
        started.append(ops)
        return later.pop(0)

    monkeypatch.setattr(job, "start_query", start_query)
    queries = [StoppedQuery("SparkException: Python worker failed to connect back.")]
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        job.watch(None, DataplaneSettings(), topology.load("twitter"), queries)
    assert len(started) == 2  # two transient failures restarted, the bug was not
    assert started[0] == ["parse", "classify_content", "classify_author", "store"]


def test_a_query_stopped_on_purpose_ends_the_watch(monkeypatch):
    monkeypatch.setattr(job.time, "sleep", lambda s: None)
    job.watch(None, DataplaneSettings(), topology.load("twitter"), [StoppedQuery(None)])


class ServingQuery:
    """Runs three polls of the watch, its first batch done from the second, then stops."""

    name = "op_ops"

    def __init__(self) -> None:
        self.polls = 0

    @property
    def lastProgress(self) -> dict | None:
        return {"batchId": 0} if self.polls >= 1 else None

    @property
    def isActive(self) -> bool:
        self.polls += 1
        return self.polls <= 3

    def exception(self) -> None:
        return None


def test_the_watch_says_when_every_query_has_finished_a_batch_until_it_is_recorded(monkeypatch):
    monkeypatch.setattr(job.time, "sleep", lambda s: None)
    said: list[int] = []

    def serving() -> bool:  # Redis away the first time: not recorded
        said.append(1)
        return len(said) == 2

    query = ServingQuery()
    query.polls = -2  # five polls: serving from the second on
    job.watch(None, DataplaneSettings(), topology.load("twitter"), [query], serving)
    assert said == [1, 1]


def test_batch_phases_say_where_a_cycle_went():
    """Two batches 1 s apart (by start), of 800 and 700 ms: 1,700 ms from the first's
    start to the second's end, 1,500 of them in batches, so 200 ms between them."""
    progress = [
        {"batchId": 7, "timestamp": "2026-11-23T10:00:00.000Z",
         "durationMs": {"triggerExecution": 800, "addBatch": 600}},
        {"batchId": 8, "timestamp": "2026-11-23T10:00:01.000Z",
         "durationMs": {"triggerExecution": 700, "addBatch": 600}},
    ]  # fmt: skip
    phases = job.batch_phases(progress)
    assert phases["triggerExecution"] == pytest.approx(750)
    assert phases["addBatch"] == pytest.approx(600)
    assert phases["between"] == pytest.approx(200)
