"""A keyed partition handed over inside a running task (``services/dataplane/handover``),
through the real per-event steps on a real redis-server and broker: the old owner
commits the partition where it stopped, the new owner holds the partition's records
until then and starts exactly there; every event's effect lands once."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import yaml

from elastic_sps.io.envelope import Envelope
from elastic_sps.io.knowledge_base import Keys, KnowledgeBase
from elastic_sps.io.state_store import PartitionStore
from elastic_sps.model import topology
from elastic_sps.model.keyed import key_group
from elastic_sps.services.dataplane.committing import cut_results
from elastic_sps.services.dataplane.feed import Batch, Feed
from elastic_sps.services.dataplane.group import GroupRun
from elastic_sps.services.dataplane.handover import WAKE, Acquire, HandOver, KeyedMoves, Release
from elastic_sps.services.dataplane.options import SourceOptions
from elastic_sps.services.dataplane.publishing import publish
from elastic_sps.services.dataplane.replica import Epoch, Replica, Span, serve_replica
from elastic_sps.services.dataplane.slots import Slot
from elastic_sps.settings import DataplaneSettings
from tests.support.records import Record

pytestmark = pytest.mark.integration

POOL = 4
DOC = {
    "name": "handover",
    "operators": [
        {
            "name": "total",
            "code": "benchmarks.harness.keyed_ops:running_total",
            "key": "field:k",
            "et_ms": 0.1,
            "min_replicas": 1,
            "max_replicas": POOL,
        }
    ],
    "edges": [{"from": "source", "to": "total"}],
}


def record(partition: int, offset: int, key: str, v: int) -> Batch:
    payload = {"k": key, "v": v, "sent": time.time()}
    body = Envelope(f"{key}-{offset}", time.time(), "source", payload).encode()
    return Batch([Record(partition, offset, body, key.encode())], time.perf_counter())


@pytest.fixture
def group(kafka_bootstrap: str, redis_url: str, tmp_path) -> GroupRun:
    tag = f"ho{uuid.uuid4().hex[:6]}"
    path = tmp_path / "handover.yaml"
    path.write_text(yaml.safe_dump(DOC))
    topo = topology.load(path)
    settings = DataplaneSettings(
        kafka_bootstrap_servers=kafka_bootstrap, redis_url=redis_url, key_prefix=tag
    )
    return GroupRun(SourceOptions.build(settings, topo, ["total"], "none"), "total", 1)


def state_of(g: GroupRun, partition: int, key: str) -> Any:
    store = PartitionStore(g.r, g.keys, "total", partition)
    return store.get("s", key_group(key, g.op.key_groups), key), store.committed


def test_a_moved_partition_continues_where_its_old_owner_committed(group: GroupRun) -> None:
    g = group
    old, new = Replica(g, 0), Replica(g, 1)
    old.serve_planned([Slot(j, 0, 0, owner=0) for j in range(POOL)], {j: [] for j in range(4)})
    old.take_in([record(2, 0, "a", 5), record(2, 1, "a", 7), record(0, 0, "b", 1)])
    move = HandOver(2, 1, Feed())
    # the new owner hears of the move, and gets the partition's next record, first
    new.take_in([Acquire(move), record(2, 2, "a", 11)])
    new.adopt_released()
    assert 2 not in new.runs  # held: the old owner has not committed yet
    old.take_in([Release(move)])
    old.commits.settle()  # handed on from a thread of its own
    assert (move.done.is_set(), move.next_offset) == (True, 2)
    assert move.to.get_nowait() is WAKE
    assert state_of(g, 2, "a") == ({"n": 2, "total": 12}, 2)  # committed at the hand-over
    new.take_in([WAKE])
    new.adopt_released()
    publish(g, new.finish() + old.finish())
    assert state_of(g, 2, "a") == ({"n": 3, "total": 23}, 3)  # each event once
    assert state_of(g, 0, "b") == ({"n": 1, "total": 1}, 1)  # unmoved, its owner kept it
    pauses = KnowledgeBase(g.r, Keys(g.keys.prefix)).pauses("total")
    moved = [p for p in pauses if p["partition"] == 2]
    assert moved and moved[-1]["moved"] is True


def test_partitions_leaving_in_one_chunk_are_committed_with_one_flush(
    group: GroupRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A count from 1 to 4 puts three releases in the one replica's feed: they are
    committed together, so the partition that stays waits for one flush, not three."""
    g = group
    old = Replica(g, 0)
    old.serve_planned([Slot(j, 0, 0, owner=0) for j in range(POOL)], {j: [] for j in range(4)})
    old.take_in([record(1, 0, "a", 5), record(3, 0, "c", 2), record(3, 1, "c", 4)])
    flushes: list[float] = []
    flush = g.producer.flush
    monkeypatch.setattr(g.producer, "flush", lambda *a, **k: (flushes.append(1), flush(*a, **k))[1])
    to = Feed()
    one, three = HandOver(1, 1, to), HandOver(3, 1, to)
    old.take_in([Release(one), Release(three), record(0, 0, "b", 9)])
    old.commits.settle()
    assert len(flushes) == 1
    assert [(m.done.is_set(), m.next_offset) for m in (one, three)] == [(True, 1), (True, 2)]
    assert state_of(g, 1, "a") == ({"n": 1, "total": 5}, 1)
    assert state_of(g, 3, "c") == ({"n": 2, "total": 6}, 2)
    assert sorted(old.runs) == [0, 2]  # the record after the releases served by its owner
    publish(g, old.finish())
    assert state_of(g, 0, "b") == ({"n": 1, "total": 9}, 1)


def held_flushes(g: GroupRun, monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """The producer's flushes wait until the event returned is set."""
    through = threading.Event()
    flush = g.producer.flush

    def held(*a: Any, **k: Any) -> None:
        assert through.wait(30)
        flush(*a, **k)

    monkeypatch.setattr(g.producer, "flush", held)
    return through


def test_the_partitions_that_stay_are_served_while_a_release_flushes(
    group: GroupRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The release's flush (a broker round trip) and commit run off the replica's
    thread: partition 0's records in the chunks after the release's are served while
    the flush is held, and partition 2 is freed only once the flush is through."""
    g = group
    old = Replica(g, 0)
    old.serve_planned([Slot(j, 0, 0, owner=0) for j in (0, 2)], {0: [], 2: []})
    old.take_in([record(2, 0, "a", 5)])
    through = held_flushes(g, monkeypatch)
    move = HandOver(2, 1, Feed())
    try:
        old.take_in([Release(move), record(0, 0, "b", 9)])
        old.take_in([record(0, 1, "b", 4)])  # a chunk after the release's
        assert old.runs[0].res.processed == 2  # both served, the flush still held
        assert not move.done.is_set()
    finally:
        through.set()
    old.commits.settle()
    assert (move.done.is_set(), move.next_offset) == (True, 1)
    assert state_of(g, 2, "a") == ({"n": 1, "total": 5}, 1)


def test_a_checkpoint_commits_the_cut_off_the_replicas_thread(
    group: GroupRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint waits for its outputs' delivery and commits from a thread of its
    own: the events after the cut are served meanwhile (one reading a key from Redis,
    fenced against the commit before), and the commit holds the cut's state and offset
    alone; a read after it lands is fenced against the new commit, not refused."""
    g = group
    replica = Replica(g, 0)
    replica.serve_planned([Slot(2, 0, 0, owner=0)], {2: []})
    replica.take_in([record(2, 0, "a", 5)])
    through = held_flushes(g, monkeypatch)
    cut = cut_results(list(replica.runs.values()))
    assert cut is not None
    replica.commits.checkpoint(cut)
    try:
        replica.take_in([record(2, 1, "a", 7), record(2, 2, "b", 1)])
        assert replica.runs[2].res.processed == 2  # served, the commit still waiting
        assert state_of(g, 2, "a")[1] is None
    finally:
        through.set()
    replica.commits.settle()
    assert state_of(g, 2, "a") == ({"n": 1, "total": 5}, 1)  # the cut's alone
    replica.take_in([record(2, 3, "c", 2)])  # a key not read before
    assert not replica.runs[2].keyed.fenced
    publish(g, replica.finish())
    assert state_of(g, 2, "a") == ({"n": 2, "total": 12}, 4)
    assert state_of(g, 2, "b") == ({"n": 1, "total": 1}, 4)
    assert state_of(g, 2, "c") == ({"n": 1, "total": 2}, 4)


def test_a_release_whose_flush_fails_frees_nothing_and_fails_the_replica(
    group: GroupRun,
) -> None:
    """A delivery that failed before the release (reported to no flush of the replica's
    yet) fails the release's flush in its own thread: the partition is not freed, and
    the replica raises at its next chunk."""
    g = group
    old = Replica(g, 0)
    old.serve_planned([Slot(j, 0, 0, owner=0) for j in (0, 2)], {0: [], 2: []})
    old.take_in([record(2, 0, "a", 5)])
    g.producer.flush()  # the replica's last flush
    g.producer._failed(1)  # a delivery report with an error, as the client's callback counts it
    move = HandOver(2, 1, Feed())
    old.take_in([Release(move)])
    with pytest.raises(RuntimeError, match="1 records failed delivery"):
        old.commits.settle()
    assert not move.done.is_set()
    with pytest.raises(RuntimeError, match="failed delivery"):
        old.commits.check()


def test_a_pooled_thread_whose_replica_failed_a_delivery_serves_the_next_task(
    group: GroupRun,
) -> None:
    """A delivery failed before a replica's checkpoint: its commit fails and the replica
    raises. The next task's replica on the same pooled thread answers for it no more:
    its checkpoint and its end commit what it did."""
    g = group
    pool = ThreadPoolExecutor(max_workers=1)

    def serve(fail: bool) -> list[Any]:
        feed: Feed = Feed()
        feed.put(record(0, 0, "a", 1))
        g.producer.seen()  # the thread's first use: what failed before was others'
        if fail:
            g.producer._failed(1)
        epoch = Epoch(time.monotonic() + 1.0, checkpoint_s=0.01)
        return serve_replica(g, 0, [Slot(0, 0, 0, owner=0)], {0: []}, feed, epoch)

    with pytest.raises(RuntimeError, match="1 records failed delivery"):
        pool.submit(serve, True).result()
    publish(g, pool.submit(serve, False).result())
    pool.shutdown()
    assert state_of(g, 0, "a") == ({"n": 1, "total": 1}, 1)


def test_a_fenced_owner_hands_nothing_on_and_the_commit_stays_the_other_attempts(
    group: GroupRun,
) -> None:
    """Two attempts at partition 2 at once (a retry beside a task that lives on): the
    other commits first, at offset 2; this one's release is refused, so it frees nothing.
    The new owner holds the partition's records to the epoch's end and returns nothing
    for it: the next task starts from the other attempt's commit."""
    g = group
    old, other, new = Replica(g, 0), Replica(g, 0), Replica(g, 1)
    for attempt in (old, other):
        attempt.serve_planned([Slot(2, 0, 0, owner=0)], {2: []})
        attempt.take_in([record(2, 0, "a", 5), record(2, 1, "a", 7)])
    publish(g, other.finish())
    old.take_in([record(2, 2, "a", 11)])
    move = HandOver(2, 1, Feed())
    new.take_in([Acquire(move), record(2, 3, "a", 13)])
    old.take_in([Release(move)])
    old.commits.settle()
    assert not move.done.is_set() and move.to.empty()
    new.adopt_released()
    assert new.finish() == []
    assert state_of(g, 2, "a") == ({"n": 2, "total": 12}, 2)  # none of the refused attempt's


def moving_on(g: GroupRun, span: Span) -> tuple[list[Replica], HandOver, HandOver]:
    """Replicas a, b and c serving until ``span``'s end; a holds partition 3 (z += 1),
    which moves to b (``first``, z += 2 held there) and on to c (``onward``, z += 4)."""
    replicas = [Replica(g, i) for i in range(3)]
    for replica in replicas:
        replica.epoch = Epoch(span.deadline, span=span)
    a, b, c = replicas
    a.serve_planned([Slot(3, 0, 0, owner=0)], {3: []})
    first, onward = HandOver(3, 1, Feed()), HandOver(3, 2, Feed())
    a.take_in([record(3, 0, "z", 1)])
    b.take_in([Acquire(first), record(3, 1, "z", 2)])
    c.take_in([Acquire(onward), record(3, 2, "z", 4)])
    return replicas, first, onward


def assert_passed_through(g: GroupRun, replicas: list[Replica], onward: HandOver) -> None:
    """b handed partition 3 on at offset 2, and c served it: each event applied once."""
    a, b, c = replicas
    b.commits.settle()
    assert (onward.done.is_set(), onward.next_offset) == (True, 2)
    c.adopt_released()
    publish(g, a.finish() + b.finish() + c.finish())
    assert state_of(g, 3, "z") == ({"n": 3, "total": 7}, 3)


def test_a_partition_moved_twice_in_one_epoch_passes_through_in_order(group: GroupRun) -> None:
    g = group
    (a, b, c), first, second = moving_on(g, Span(time.monotonic() + 30))
    a.take_in([Release(first)])  # a commits at 1; b may now adopt, then hand on
    a.commits.settle()
    b.take_in([Release(second)])
    assert_passed_through(g, [a, b, c], second)


def test_a_move_on_waits_for_the_earlier_owner_past_the_epochs_first_end(
    group: GroupRun,
) -> None:
    """b waits for a to free partition 3 before handing it on to c; meanwhile the next
    task takes the window over and moves its end 30 s on. a frees it after the first
    end: b adopts it, hands it on, and c serves it (before, b's wait ended at the first
    end, the move on was dropped, and c held the partition to the epoch's end)."""
    g = group
    span = Span(time.monotonic() + 0.5)
    (a, b, c), first, onward = moving_on(g, span)
    waiting = threading.Thread(target=b.take_in, args=([Release(onward)],))
    waiting.start()
    span.deadline = time.monotonic() + 30  # taken over: the window serves on
    time.sleep(1.0)  # past the first end
    a.take_in([Release(first)])
    a.commits.settle()
    waiting.join(10)
    assert_passed_through(g, [a, b, c], onward)


def test_a_partition_its_earlier_owner_frees_after_the_epoch_is_left_to_the_next_task(
    group: GroupRun,
) -> None:
    """b gives up waiting for partition 3 at the epoch's end and forgets what it held:
    when a frees it afterwards, b does not take it (the move on is not done), and the
    next task reads on from a's commit."""
    g = group
    (a, b, _), first, onward = moving_on(g, Span(time.monotonic() + 0.3))
    b.take_in([Release(onward)])  # returns at the epoch's end
    a.take_in([Release(first)])
    a.commits.settle()
    b.adopt_released()
    assert 3 not in b.runs and not b.waiting and not onward.done.is_set()
    publish(g, a.finish() + b.finish())
    assert state_of(g, 3, "z") == ({"n": 1, "total": 1}, 1)  # offset 1 is the next task's


def test_the_reader_reroutes_the_moving_partitions_and_records_the_move(group: GroupRun) -> None:
    g = group
    q0: Feed = Feed()
    spawned: dict[int, Feed] = {}

    def spawn(replica_id: int) -> Feed:
        spawned[replica_id] = Feed()
        return spawned[replica_id]

    moves = KeyedMoves(g, 1, {0: q0}, spawn)
    feeds = dict.fromkeys(range(POOL), q0)
    moves(feeds)  # the count is still 1: nothing moves
    assert q0.empty() and not spawned
    g.r.set(g.keys.active("total"), 2)
    moves(feeds)
    # 4 partitions over 2 replicas: 0 and 1 stay with replica 0, 2 and 3 go to replica 1
    assert feeds == {0: q0, 1: q0, 2: spawned[1], 3: spawned[1]}
    released = [q0.get_nowait().move.partition for _ in range(2)]
    acquired = [spawned[1].get_nowait().move.partition for _ in range(2)]
    assert released == acquired == [2, 3]
    assert g.active == 2
    assert moves.recording is not None
    moves.recording.join()  # recorded off the reader's thread
    (move,) = KnowledgeBase(g.r, Keys(g.keys.prefix)).moves()
    assert (move["from"], move["to"], move["partitions"]) == (1, 2, [2, 3])


def test_every_new_owner_starts_before_the_old_one_is_told_to_release(group: GroupRun) -> None:
    """1 -> 4: the three threads start first, so the one replica finds its three
    releases together (committed at once) rather than one per thread start."""
    g = group
    q0: Feed = Feed()
    waiting_at_spawn: list[int] = []

    def spawn(replica_id: int) -> Feed:
        waiting_at_spawn.append(q0.qsize())
        return Feed()

    moves = KeyedMoves(g, 1, {0: q0}, spawn)
    g.r.set(g.keys.active("total"), 4)
    moves(dict.fromkeys(range(POOL), q0))
    assert waiting_at_spawn == [0, 0, 0]
    assert [q0.get_nowait().move.partition for _ in range(3)] == [1, 2, 3]
    assert moves.recording is not None
    moves.recording.join()
