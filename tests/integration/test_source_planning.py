"""The source's driver side, against a real redis-server: a micro-batch reads the knowledge
base once (one pipeline in latestOffset), its partitions and the previous batch's commit
reuse those reads, and what it plans from them is right.

Spark's order for batch N (seen in Spark 4 with and without async progress tracking):
latestOffset(N), then commit(an earlier batch's end) when it commits one, partitions(N),
then N's tasks; one batch at a time, all in one planner process."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from redis.connection import AbstractConnection

from elastic_sps.contracts.metrics import OperatorCounters
from elastic_sps.io.knowledge_base import Keys
from elastic_sps.model import topology
from elastic_sps.services.dataplane.options import SourceOptions
from elastic_sps.services.dataplane.source import WARM, OperatorReader, SlotGroup
from elastic_sps.settings import DataplaneSettings

pytestmark = pytest.mark.integration  # a real redis-server (tests/conftest.py)

OPS = ["parse", "classify_content", "classify_author", "store"]  # twitter's: pools of 8
KEYED = "tests.support.keyed_ops"


class Sink:
    """The metrics producer: keeps what commit publishes."""

    def __init__(self) -> None:
        self.sent: list[OperatorCounters] = []

    def produce(self, topic: str, value: bytes) -> None:
        self.sent.append(OperatorCounters.model_validate_json(value))

    def flush(self, timeout: float) -> int:
        return 0


class Trips:
    """Round trips to Redis: every send on a connection (a command, or a whole pipeline)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        send = AbstractConnection.send_packed_command

        def counted(conn: Any, command: Any, check_health: bool = True) -> None:
            self.n += 1
            send(conn, command, check_health)

        monkeypatch.setattr(AbstractConnection, "send_packed_command", counted)

    def take(self) -> int:
        n, self.n = self.n, 0
        return n


@pytest.fixture
def keys(redis_client: Any) -> Keys:
    k = Keys("plan" + uuid.uuid4().hex[:6])
    for op in OPS:
        redis_client.set(k.active(op), 2)
        redis_client.hset(k.ends(k.topic(op)), mapping={"0": 100, "1": 50})
        redis_client.hset(k.committed(op), mapping={"0": 10})
    return k


@pytest.fixture(autouse=True)
def no_sps_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("SPS_")]:
        monkeypatch.delenv(name)


CPU_DOC = {
    "name": "cpu",
    "operators": [
        {
            "name": "busy",
            "code": f"{KEYED}:running_total",
            "key": "field:k",
            "et_ms": 2,
            "cpu_share": 1.0,
            "max_replicas": 2,
        },
        {
            "name": "calm",
            "code": f"{KEYED}:running_total",
            "key": "field:k",
            "et_ms": 2,
            "max_replicas": 2,
            "chain": False,  # a pool of its own
        },
    ],
    "edges": [{"from": "source", "to": "busy"}, {"from": "busy", "to": "calm"}],
}


READERS: list[OperatorReader] = []


@pytest.fixture(autouse=True)
def readers_stopped() -> Iterator[None]:
    """Each test's readers stopped at its end, as Spark stops a query's: a reader's queue
    reporter (started by its first commit) reads Redis every td until then."""
    yield
    while READERS:
        READERS.pop().stop()


def reader(
    redis_url: str,
    keys: Keys,
    ops: list[str],
    topo: Any = "twitter",
    holder: str = "",
    **settings: Any,
) -> OperatorReader:
    chosen = DataplaneSettings(redis_url=redis_url, key_prefix=keys.prefix, **settings)
    options = SourceOptions.build(chosen, topology.load(topo), ops, "none", holder=holder)
    out = OperatorReader(options)
    READERS.append(out)
    out._producer = Sink()
    out._redis().ping()  # connected: the handshake is no batch's
    return out


@pytest.fixture
def watermarks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The broker's ends, as the registry's: counts the ListOffsets calls."""
    calls = [0]

    def ends(self: OperatorReader, ops: list[str]) -> dict[str, list[int]]:
        calls[0] += 1
        return {op: [100, 50, 0, 0, 0, 0, 0, 0] for op in ops}

    monkeypatch.setattr(OperatorReader, "_watermark_ends", ends)
    yield calls


def batches(r: OperatorReader, trips: Trips, n: int) -> list[tuple[int, int, int]]:
    """Round trips of latestOffset, commit and partitions, batch by batch."""
    start, previous, out = r.initialOffset(), None, []
    for _ in range(n):
        end = r.latestOffset(start, None)
        lo = trips.take()
        if previous is not None:
            r.commit(previous)
        co = trips.take()
        r.partitions(start, end)
        out.append((lo, co, trips.take()))
        previous, start = end, end
    return out


@pytest.mark.parametrize("ends", ["registry", "watermarks"])
def test_a_batch_reads_the_knowledge_base_once(redis_url, keys, monkeypatch, watermarks, ends):
    r = reader(redis_url, keys, OPS, partition_ends=ends)
    trips = Trips(monkeypatch)
    first, *steady = batches(r, trips, 4)
    # a (re)started reader checks each operator's rescale marker once: 4 reads more
    assert first == (1 + 4, 0, 1)
    # latestOffset: one pipeline (counts, progress, registry ends); commit: none;
    # partitions: the batch log's write. 9 round trips a batch with the registry, 7 with
    # watermarks, before.
    assert steady == [(1, 0, 1)] * 3
    # watermarks: one ListOffsets a batch, in latestOffset (two before: commit's too)
    assert watermarks[0] == (4 if ends == "watermarks" else 0)


def test_an_idle_poll_is_one_round_trip(redis_url, keys, monkeypatch):
    r = reader(redis_url, keys, OPS, partition_ends="registry")
    start = r.latestOffset(r.initialOffset(), None)
    trips = Trips(monkeypatch)
    assert r.latestOffset(start, None) == start and trips.take() == 1


def test_a_stopping_holders_source_plans_no_further_batch(
    redis_url: str, redis_client: Any, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = reader(redis_url, keys, ["parse"], holder="host:1:a", partition_ends="registry",
               max_events_per_task=30)  # fmt: skip
    start = r.initialOffset()
    end = r.latestOffset(start, None)
    r.partitions(start, end)
    redis_client.hset(keys.committed("parse"), mapping={"0": 40, "1": 30})  # the tasks ran
    redis_client.set(keys.dataplane_stopping("host:2:b"), 1)  # another holder's: not ours
    assert r.latestOffset(end, None)["parse"]["0"] == 70
    redis_client.set(keys.dataplane_stopping("host:1:a"), 1)
    trips = Trips(monkeypatch)
    # events wait (70 of 100 on partition 0), yet the offsets stay: Spark plans no batch
    assert r.latestOffset(end, None) == end and trips.take() == 1
    # nor a query's first (stopped as it started): not even the warm-up batch
    first = reader(redis_url, keys, ["parse"], holder="host:1:a", partition_ends="registry")
    assert first.latestOffset(first.initialOffset(), None) == first.initialOffset()


def test_reads_are_fresh_once_the_batchs_tasks_may_have_run(redis_url, keys, monkeypatch):
    r = reader(redis_url, keys, OPS, partition_ends="registry")
    start = r.initialOffset()
    end = r.latestOffset(start, None)
    trips = Trips(monkeypatch)
    r.partitions(start, end)
    assert trips.take() == 1  # the log's write
    r.commit(end)  # after the tasks: read again
    assert trips.take() == 1
    other = {**end, WARM: {"0": 2}}  # an end no latestOffset returned: a replayed batch
    r.partitions(start, other)
    assert trips.take() == 2  # counts and progress (no ends), then the log


def test_the_batch_is_planned_from_its_reads(redis_url, redis_client, keys):
    r = reader(
        redis_url, keys, ["parse"], partition_ends="registry", max_events_per_task=30,
        task_window_s=0,  # no standby slots: the planned ones only
    )  # fmt: skip
    start = r.initialOffset()
    end = r.latestOffset(start, None)
    # partition 0 processed to 10 of 100: 10 + 30; partition 1 from 0 of 50: 30
    assert end == {"parse": {"0": 40, "1": 30, **{str(j): 0 for j in range(2, 8)}}, WARM: {"0": 1}}
    redis_client.set(keys.active("parse"), 5)  # a change after latestOffset: the next batch's
    tasks = r.partitions(start, end)
    assert [(t.active, [(s.replica, s.start, s.end) for s in t.slots]) for t in tasks] == [
        (2, [(0, 10, 40), (1, 0, 30)])
    ]
    assert all(isinstance(t, SlotGroup) for t in tasks)
    assert r.latestOffset(end, None)["parse"]["0"] == 70  # 40 on, and the new count read
    assert r._reads is not None and r._reads.active == {"parse": 5}


def test_with_overlaps_a_lagging_partition_is_planned_from_its_progress(
    redis_url, redis_client, keys
):
    """Overlapping windows: partition 0 processed to 10 of 100 while Spark's offset is 70
    (a window taken over and ended before the end its task was planned with): its
    batch starts at 10, and its end stays at Spark's 70 (10 + 30 is behind it), so the
    range grows no further while the window lags; partition 1, no progress recorded,
    from Spark's 0: 30."""
    r = reader(
        redis_url, keys, ["parse"], partition_ends="registry", max_events_per_task=30,
        task_window_s=30, epoch_overlap_s=5,
    )  # fmt: skip
    start = {**r.initialOffset(), "parse": {"0": 70, **{str(j): 0 for j in range(1, 8)}}}
    end = r.latestOffset(start, None)
    assert end["parse"]["0"] == 70 and end["parse"]["1"] == 30
    slots = [s for t in r.partitions(start, end) for s in t.slots]
    assert [(s.replica, s.start, s.end) for s in slots if s.replica < 2] == [
        (0, 10, 70),
        (1, 0, 30),
    ]


def test_commit_publishes_the_queue_left_from_the_batchs_reads(redis_url, redis_client, keys):
    r = reader(redis_url, keys, ["parse"], partition_ends="registry", max_events_per_task=30)
    start = r.initialOffset()
    end = r.latestOffset(start, None)
    r.partitions(start, end)
    redis_client.hset(keys.committed("parse"), mapping={"0": 40, "1": 30})  # the tasks ran
    nxt = r.latestOffset(end, None)
    r.commit(end)
    sent = r._producer.sent
    # (100 - 40) + (50 - 30): what the batch up to ``end`` left behind
    assert [(c.operator, c.queued, c.active_replicas) for c in sent] == [("parse", 80, 2)]
    assert nxt["parse"]["0"] == 70


def test_the_warm_up_batch_serves_one_checkpoint_interval(redis_url, keys):
    # cost_mode none: no planned occupancy lengthens a batch beyond its window
    r = reader(redis_url, keys, ["parse"], partition_ends="registry", task_window_s=5,
               checkpoint_s=1)  # fmt: skip
    start = r.initialOffset()
    end = r.latestOffset(start, None)
    assert {t.serve_s for t in r.partitions(start, end)} == {1.0}  # a fresh query's first
    later = r.latestOffset(end, None)
    assert {t.serve_s for t in r.partitions(end, later)} == {5.0}


def test_a_restarted_querys_first_batch_serves_one_checkpoint_interval(redis_url, keys):
    # a batch replayed from the checkpoint by a new reader (a restart, a standby's
    # takeover): past the warm-up, yet its reader's first, so short like it
    r = reader(redis_url, keys, ["parse"], partition_ends="registry", task_window_s=5,
               checkpoint_s=1)  # fmt: skip
    start = {**r.initialOffset(), WARM: {"0": 1}}
    end = r.latestOffset(start, None)
    assert {t.serve_s for t in r.partitions(start, end)} == {1.0}
    later = r.latestOffset(end, None)
    assert {t.serve_s for t in r.partitions(end, later)} == {5.0}


def test_between_batches_the_queues_are_published_every_td(redis_url, redis_client, keys):
    r = reader(redis_url, keys, ["parse"], partition_ends="registry", td=0.2)
    start = r.initialOffset()
    end = r.latestOffset(start, None)
    r.partitions(start, end)
    r.latestOffset(end, None)
    r.commit(end)
    try:
        # the replicas checkpoint inside the epoch: 100 - 90 and 50 - 45 left
        redis_client.hset(keys.committed("parse"), mapping={"0": 90, "1": 45})
        redis_client.set(keys.active("parse"), 3)
        deadline = time.monotonic() + 10
        while (r._producer.sent[-1].queued, r._producer.sent[-1].active_replicas) != (15, 3):
            assert time.monotonic() < deadline, r._producer.sent[-3:]
            time.sleep(0.05)
    finally:
        r.stop()
    time.sleep(0.6)  # a publication under way as it stopped lands
    n = len(r._producer.sent)
    time.sleep(0.6)
    assert len(r._producer.sent) == n  # stopped with its query


def test_the_queues_count_from_what_the_replicas_served_since_their_checkpoint(
    redis_url, redis_client, keys
):
    # the batch planned to 40 and 30 (30 events a slot); served since: 95 on partition
    # 0, and on 1 an offset behind a later commit (40 < 45), which must not raise the level
    r = reader(redis_url, keys, ["parse"], partition_ends="registry", max_events_per_task=30)
    start = r.initialOffset()
    end = r.latestOffset(start, None)
    r.partitions(start, end)
    redis_client.hset(keys.position("parse"), mapping={"0": 95, "1": 40})
    redis_client.hset(keys.committed("parse"), mapping={"1": 45})
    r.latestOffset(end, None)
    r.commit(end)
    # (100 - 95) + (50 - 45)
    assert [(c.operator, c.queued) for c in r._producer.sent] == [("parse", 10)]


def test_a_cpu_bound_keyed_operator_moves_at_a_new_task(redis_url, redis_client, keys, tmp_path):
    # the threads of one task share one core: a CPU-bound keyed operator's new replicas
    # need new tasks, so a change of its count ends the epoch; a waiting one's moves
    # are handed over inside its task
    path = tmp_path / "cpu.yaml"
    path.write_text(yaml.safe_dump(CPU_DOC))
    redis_client.set(keys.active("busy"), 1)  # both partitions with one replica, one task
    redis_client.set(keys.active("calm"), 1)
    r = reader(redis_url, keys, ["busy", "calm"], topo=path, partition_ends="registry",
               tasks_per_query=1, cores=2)  # fmt: skip
    start = r.initialOffset()
    tasks = r.partitions(start, r.latestOffset(start, None))
    by_op = {t.operator: t for t in tasks}
    assert by_op["busy"].moves_in_task is False and "busy" in by_op["busy"].keyed_active
    assert by_op["calm"].moves_in_task is True and "calm" not in by_op["calm"].keyed_active


def test_a_cpu_bound_keyed_operator_with_one_core_moves_inside_its_task(
    redis_url, redis_client, keys, tmp_path
):
    # one core: its next epoch would pack its replicas into one task again
    path = tmp_path / "cpu.yaml"
    path.write_text(yaml.safe_dump(CPU_DOC))
    redis_client.set(keys.active("busy"), 1)
    redis_client.set(keys.active("calm"), 1)
    r = reader(redis_url, keys, ["busy", "calm"], topo=path, partition_ends="registry",
               tasks_per_query=1, cores=1)  # fmt: skip
    start = r.initialOffset()
    tasks = r.partitions(start, r.latestOffset(start, None))
    busy = next(t for t in tasks if t.operator == "busy")
    assert busy.moves_in_task is True and busy.keyed_active == {}


def test_an_entry_step_plans_the_sources_partitions_among_its_replicas(
    redis_url, redis_client, keys, monkeypatch
):
    # admission at the entry step: parse reads the source's 3 partitions (its pool is 8),
    # its 2 active replicas own them (0, 1 -> replica 0; 2 -> replica 1), their ends the
    # broker's though the other operators' come from the registry
    asked: list[list[str]] = []

    def ends(self: OperatorReader, ops: list[str]) -> dict[str, list[int]]:
        asked.append(ops)
        return {op: [30, 0, 12] for op in ops}

    monkeypatch.setattr(OperatorReader, "_watermark_ends", ends)
    redis_client.delete(keys.committed("parse"))
    chosen = DataplaneSettings(redis_url=redis_url, key_prefix=keys.prefix,
                               partition_ends="registry", admission="entry")  # fmt: skip
    options = SourceOptions.build(chosen, topology.load("twitter"), OPS, "none", ("src", 3))
    r = OperatorReader(options)
    READERS.append(r)
    start = r.initialOffset()
    assert start["parse"] == {"0": 0, "1": 0, "2": 0} and len(start["store"]) == 8
    end = r.latestOffset(start, None)
    assert asked == [["parse"]]
    assert end["parse"] == {"0": 30, "1": 0, "2": 12}
    tasks = [t for t in r.partitions(start, end) if t.operator == "parse"]
    assert [[(s.replica, s.owner, s.start, s.end) for s in t.slots] for t in tasks] == [
        [(0, 0, 0, 30), (1, 0, 0, 0), (2, 1, 0, 12)]
    ]
    assert tasks[0].moves_in_task is True  # a resize hands partitions over in the task
