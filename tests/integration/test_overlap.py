"""Epochs that overlap (``SPS_EPOCH_OVERLAP_S``, ``services/dataplane/overlap.py``),
through real tasks' epochs (``task.run_group``, as Spark's Python worker runs them) on a
real broker and redis-server: a task's window goes on serving after the task returned,
and the next task takes it over (in the same worker, as it is; with other slots, from
its commit), every record processed once."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
import redis

from elastic_sps.io import id_ledger
from elastic_sps.io.envelope import decode
from elastic_sps.io.knowledge_base import Keys
from elastic_sps.io.watermarks import is_declaration
from elastic_sps.services.dataplane import replica
from elastic_sps.services.dataplane.group import GroupRun
from elastic_sps.services.dataplane.options import SourceOptions
from elastic_sps.services.dataplane.overlap import Window
from elastic_sps.services.dataplane.replica import Span
from elastic_sps.services.dataplane.slots import Slot
from elastic_sps.services.dataplane.task import run_group
from tests.integration.test_entry_step import entry_pipeline, produce, raw_records, wait_until

pytestmark = pytest.mark.integration

SLOTS = (Slot(0, 0, 0, owner=0), Slot(1, 0, 0, owner=0))  # both partitions, one replica


def overlap_run(kafka_bootstrap: str, redis_url: str, folder: Any) -> dict[str, Any]:
    tag = f"ov{uuid.uuid4().hex[:6]}"
    source, settings, topo = entry_pipeline(
        tag, kafka_bootstrap, redis_url, folder, idle_s=1.0, track_ids=True,
        epoch_overlap_s=60.0,
    )  # fmt: skip
    o = SourceOptions.build(settings, topo, ["step"], "none", (source, 2))
    r = redis.Redis.from_url(redis_url)
    return {"tag": tag, "source": source, "o": o, "r": r}


def task(run: dict[str, Any], slots: tuple[Slot, ...] = SLOTS, **kw: Any) -> list[Any]:
    return run_group(run["o"], "step", slots, 1, keyed_active={"step": 1}, **kw)


def processed(run: dict[str, Any]) -> set[str]:
    members = run["r"].smembers(id_ledger.key(run["tag"], "step", "processed"))
    return {m.decode() for m in members}


def outputs(run: dict[str, Any], bootstrap: str) -> list[str]:
    """The ids ``step`` produced for ``after``, repeats kept."""
    records = raw_records(bootstrap, Keys(run["tag"]).topic("after"), 2)
    return sorted(decode(v).id for _, v in records if not is_declaration(v))


def overlaps(run: dict[str, Any]) -> list[bytes]:
    return list(run["r"].scan_iter(Keys(run["tag"]).overlaps))


def test_a_window_serves_between_its_task_and_the_next_which_takes_it_over(
    kafka_bootstrap: str, redis_url: str, tmp_path: Any
) -> None:
    """Task 1 serves 1 s and returns with its window still serving (recorded for the next
    task); two orders produced after it are processed with no task running; task 2, with
    the same slots in the same worker, takes the window over and returns with it still
    serving; task 3 (a warm-up task, which does not outlive its epoch) takes it over and
    ends it. Ten orders, each processed and produced once; the rows are the window's."""
    run = overlap_run(kafka_bootstrap, redis_url, tmp_path)
    produce(kafka_bootstrap, run["source"], 0, [10, 11, 12, 13, 14])
    produce(kafka_bootstrap, run["source"], 1, [20, 21, 22])
    assert task(run, serve_s=1.0) == []
    assert len(overlaps(run)) == 2  # both partitions, served past the task
    produce(kafka_bootstrap, run["source"], 0, [15, 16])
    wait_until(lambda: {"o15", "o16"} <= processed(run), "served with no task running")
    assert task(run, serve_s=0.5) == []
    produce(kafka_bootstrap, run["source"], 1, [23])
    rows = task(run, serve_s=1.0, warm=True)
    ids = {f"o{t}" for t in (10, 11, 12, 13, 14, 15, 16, 20, 21, 22, 23)}
    assert processed(run) == ids
    assert outputs(run, kafka_bootstrap) == sorted(ids)
    assert sorted((row.replica, row.end) for row in rows) == [(0, 7), (1, 4)]
    assert overlaps(run) == []


def test_a_task_with_other_slots_starts_from_the_windows_commit(
    kafka_bootstrap: str, redis_url: str, tmp_path: Any
) -> None:
    """Task 1's window serves both partitions past it; task 2 serves partition 0 alone
    (another plan: it cannot take the window over), so it asks the window to end, waits
    for its commit and reads on from there: each order processed and produced once."""
    run = overlap_run(kafka_bootstrap, redis_url, tmp_path)
    produce(kafka_bootstrap, run["source"], 0, [10, 11, 12])
    produce(kafka_bootstrap, run["source"], 1, [20])
    assert task(run, serve_s=1.0) == []
    produce(kafka_bootstrap, run["source"], 0, [13])
    wait_until(lambda: "o13" in processed(run), "the window serving")
    produce(kafka_bootstrap, run["source"], 0, [14])
    rows = task(run, (Slot(0, 0, 0, owner=0),), serve_s=1.0, warm=True)
    assert processed(run) == {"o10", "o11", "o12", "o13", "o14", "o20"}
    assert outputs(run, kafka_bootstrap) == ["o10", "o11", "o12", "o13", "o14", "o20"]
    assert [(row.replica, row.end) for row in rows] == [(0, 5)]
    assert overlaps(run) == []


def test_a_window_whose_process_died_holds_its_partitions_until_its_record_lapses(
    kafka_bootstrap: str, redis_url: str, tmp_path: Any
) -> None:
    """A record of a window that no process serves any more (its worker died), lapsing
    in 1.5 s: the next task asks it to end, then waits for the lapse before it reads."""
    run = overlap_run(kafka_bootstrap, redis_url, tmp_path)
    produce(kafka_bootstrap, run["source"], 0, [10])
    keys = Keys(run["tag"])
    run["r"].set(keys.overlap("step", 0), "gone|dead", px=1500)
    began = time.monotonic()
    task(run, serve_s=3.0, warm=True)
    assert time.monotonic() - began >= 1.4
    assert run["r"].get(keys.overlap_end("dead")) == b"1"
    assert processed(run) == {"o10"}


def test_a_task_claims_the_group_whose_window_its_worker_serves(
    kafka_bootstrap: str, redis_url: str, tmp_path: Any
) -> None:
    """Two groups of two replicas, one partition each. Batch b1: task 0 serves its own
    group, whose window outlives it. Batch b2, in the same worker: task 1 comes first
    and claims group 0, whose window it takes over; task 0 then gets group 1 (fresh).
    Batch b3: a warm-up task ends the window. Each order processed and produced once."""
    run = overlap_run(kafka_bootstrap, redis_url, tmp_path)
    g0, g1 = (Slot(0, 0, 0),), (Slot(1, 0, 0),)
    produce(kafka_bootstrap, run["source"], 0, [10, 11])
    produce(kafka_bootstrap, run["source"], 1, [20])

    def task_of(slots: tuple[Slot, ...], batch: str, **kw: Any) -> list[Any]:
        return run_group(run["o"], "step", slots, 2, batch=((g0, g1), batch), **kw)

    assert task_of(g0, "b1", serve_s=1.0) == []
    produce(kafka_bootstrap, run["source"], 0, [12])
    wait_until(lambda: "o12" in processed(run), "group 0's window serving")
    assert task_of(g1, "b2", serve_s=0.5) == []  # took group 0's window over
    keys = Keys(run["tag"])
    claims = run["r"].mget([keys.overlap_claim("b2", 0), keys.overlap_claim("b2", 1)])
    assert claims == [b"1", None]
    rows_1 = task_of(g0, "b2", serve_s=1.0, warm=True)  # group 1, from its start
    assert run["r"].get(keys.overlap_claim("b2", 1)) == b"0"
    assert [(row.replica, row.end) for row in rows_1] == [(1, 1)]
    produce(kafka_bootstrap, run["source"], 0, [13])
    rows_0 = task_of(g0, "b3", serve_s=1.0, warm=True)
    assert [(row.replica, row.end) for row in rows_0] == [(0, 4)]
    ids = ["o10", "o11", "o12", "o13", "o20"]
    assert sorted(processed(run)) == ids
    assert outputs(run, kafka_bootstrap) == ids
    assert overlaps(run) == []


def test_a_window_that_stopped_reading_keeps_its_record_until_it_has_committed(
    kafka_bootstrap: str, redis_url: str, tmp_path: Any
) -> None:
    """A window past its task (recorded for 0.1 + 3 s) whose reader has stopped while a
    replica is still finishing: its record now covers its flush and commit
    (``FINAL_COMMIT_S``), so no task of another worker starts on its partitions from
    the commit before it; the record goes once the window has ended."""
    run = overlap_run(kafka_bootstrap, redis_url, tmp_path)
    g = GroupRun(run["o"], "step", 1)
    window = Window(g, SLOTS, ("ov-test",), 0, "h")
    window.span.deadline = time.monotonic() + 0.3
    stopped_reading, finish = threading.Event(), threading.Event()

    def reader_then_replicas(ends: Any) -> list[Any]:  # as run_windowed, in its order
        while time.monotonic() < window.span.deadline:
            time.sleep(0.01)
        window.span.read_ended()
        stopped_reading.set()
        finish.wait(30)  # a replica finishing its last chunk
        return []

    window.start(reader_then_replicas, time.time(), 0)
    assert window.wait(time.monotonic(), 0.1) == []  # the task returns: the window outlives it
    assert stopped_reading.wait(10)
    record = Keys(run["tag"]).overlap("step", 0)
    assert run["r"].pttl(record) > 30_000
    finish.set()
    assert window.done.wait(30)
    assert overlaps(run) == []


def test_run_windowed_ends_its_read_before_its_replicas_finish(
    kafka_bootstrap: str, redis_url: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The order the test above plays, by ``run_windowed`` itself: it tells its span that
    its reader stopped (``Span.read_ended``) while its replica threads still run, not
    once they are done, then returns their results. Its replica thread is held here
    until told (10 s at most: told only after it finished, it sees False)."""
    run = overlap_run(kafka_bootstrap, redis_url, tmp_path)
    told = threading.Event()
    seen: list[bool] = []
    serve = replica.serve_replica

    def held(*args: Any) -> list[Any]:
        results = serve(*args)
        seen.append(told.wait(10))
        return results

    monkeypatch.setattr(replica, "serve_replica", held)
    g = GroupRun(run["o"], "after", 1)
    span = Span(time.monotonic() + 0.5, read_ended=told.set)
    results = replica.run_windowed(g, SLOTS, {0: [], 1: []}, span, lambda: False)
    assert seen == [True]  # one replica thread (both slots are replica 0's), told as it ran
    assert sorted(res.replica for res in results) == [0, 1]
