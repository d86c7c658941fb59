"""Keyed state over a real redis-server: state and the offset it reflects commit together,
a crash between two commits replays without a second effect, a retried task's commit is
fenced (by offset and epoch), a zombie reads nothing newer than it opened at, an event
applied once is known when it arrives again, counts go up only with a commit applied,
watermarks never go back, windows fire once (their accumulators read in one round
trip), and a late event is told apart."""

from __future__ import annotations

import pytest
import redis

from elastic_sps.io.knowledge_base import Keys
from elastic_sps.io.state_store import MISSING, Fenced, PartitionStore
from elastic_sps.model import topology
from elastic_sps.model.keyed import key_group
from elastic_sps.pipeline.stateful import Count, KeyState, Late, WindowAggregator

pytestmark = pytest.mark.integration


def _aggregator(name: str, window: dict) -> WindowAggregator:
    """A window operator keyed by ``k`` counting its events (no code)."""
    op = {"name": name, "et_ms": 1, "key": "field:k", "window": window}
    topo = topology.from_dict({"operators": [op], "edges": [{"from": "source", "to": name}]})
    return WindowAggregator(topo[name], Count())


def _add(store: PartitionStore, key: str, amount: int) -> int:
    state = KeyState(store, key_group(key, 128), key)
    state["total"] = state.get("total", 0) + amount
    state.save()
    return int(state["total"])


def test_state_and_offset_commit_together_and_a_crash_replays_once(redis_client):
    keys = Keys("state1")
    first = PartitionStore(redis_client, keys, "total", 0)
    assert first.committed is None
    assert [_add(first, "alice", a) for a in (5, 7)] == [5, 12]  # offsets 0, 1
    assert first.commit(2, owner=0)
    # the next task takes offsets 2-3 (+1, +2), then crashes before its commit
    crashed = PartitionStore(redis_client, keys, "total", 0)
    assert crashed.committed == 2
    assert [_add(crashed, "alice", a) for a in (1, 2)] == [13, 15]
    # nothing of it is visible: the retry starts from offset 2 with alice at 12
    retry = PartitionStore(redis_client, keys, "total", 0)
    assert retry.committed == 2
    assert [_add(retry, "alice", a) for a in (1, 2)] == [13, 15]
    assert retry.commit(4, owner=1)
    # the crashed attempt, had it lived on (a zombie), may not apply its effects again
    assert not crashed.commit(4, owner=0)
    after = PartitionStore(redis_client, keys, "total", 0)
    assert after.committed == 4
    assert KeyState(after, key_group("alice", 128), "alice")["total"] == 15


def test_a_tumbling_count_fires_each_window_once_and_refuses_a_late_event(redis_client):
    """Event times 1, 4, 12 (windows [0, 10) and [10, 20)); the watermark 12 closes
    [0, 10) with 2 events, [10, 20) stays open; then an event at 8 is late; the watermark
    25 closes the second window with 1."""
    agg = _aggregator("count", {"tumbling_s": 10})
    store = PartitionStore(redis_client, Keys("win1"), "count", 0)
    for t in (1.0, 4.0, 12.0):
        agg.add(store, {"k": "x"}, t)
    store.watermark = 12.0
    fired = agg.fire(store, 12.0)
    assert [(r.id, r.payload) for r in fired] == [
        ("x@0", {"key": "x", "start": 0.0, "end": 10.0, "value": 2})
    ]
    assert store.commit(3, owner=0)
    again = PartitionStore(redis_client, Keys("win1"), "count", 0)
    assert again.watermark == 12.0
    assert agg.fire(again, 12.0) == []  # fired and committed: never again
    with pytest.raises(Late):
        agg.add(again, {"k": "x"}, 8.0)
    agg.add(again, {"k": "x"}, 25.0)
    assert [r.payload["value"] for r in agg.fire(again, 25.0)] == [1]
    assert [r.id for r in agg.fire(again, 25.0)] == []


def test_sessions_merge_and_close_after_the_gap(redis_client):
    """Gap 5: events at 0 and 3 make one session [0, 8); an event at 20 opens another;
    the watermark 20 closes the first with 2 events."""
    agg = _aggregator("s", {"session_gap_s": 5})
    store = PartitionStore(redis_client, Keys("sess1"), "s", 0)
    for t in (0.0, 3.0, 20.0):
        agg.add(store, {"k": "u"}, t)
    assert [r.payload for r in agg.fire(store, 20.0)] == [
        {"key": "u", "start": 0.0, "end": 8.0, "value": 2}
    ]


def test_two_attempts_at_one_offset_commit_once(redis_client):
    """Neither attempt moves the offset (they only advance the watermark): the epoch
    fences the second, and the stored watermark does not go back."""
    keys = Keys("fence2")
    first = PartitionStore(redis_client, keys, "w", 0)
    assert first.commit(0, owner=0)  # the partition's first commit: offset 0, epoch 1
    a = PartitionStore(redis_client, keys, "w", 0)
    b = PartitionStore(redis_client, keys, "w", 0)
    a.note_marks(30.0, {}, set())
    b.note_marks(20.0, {}, set())
    assert a.commit(0, owner=0)
    assert not b.commit(0, owner=1)
    assert PartitionStore(redis_client, keys, "w", 0).watermark == 30.0


def test_counts_go_up_with_the_commit_that_is_applied_and_only_with_it(redis_client):
    """Two attempts at offsets 0-2 (3 events each): the first to commit adds its 3 to the
    counters; the other's commit is fenced and adds none, so the events count once."""
    keys = Keys("counted")
    a = PartitionStore(redis_client, keys, "total", 0)
    b = PartitionStore(redis_client, keys, "total", 0)
    for store in (a, b):
        for amount in (1, 2, 3):
            _add(store, "alice", amount)
    first = a.prepare(3, owner=0)
    first.count("counted:counts", {"processed": 3, "late": 0})
    second = b.prepare(3, owner=1)
    second.count("counted:counts", {"processed": 3})
    assert a.apply(first)
    assert not b.apply(second)
    assert redis_client.hgetall("counted:counts") == {b"processed": b"3"}


def test_a_counter_that_cannot_go_up_fails_the_commit_before_any_write(redis_client):
    """The counts hash holds a field that is not a number: the commit's script fails on
    it before it writes state, ids or offset (a failed script keeps what it wrote)."""
    keys = Keys("miscount")
    redis_client.hset("miscount:counts", "processed", "many")
    store = PartitionStore(redis_client, keys, "total", 0)
    _add(store, "alice", 5)
    commit = store.prepare(1, owner=0)
    commit.count("miscount:counts", {"processed": 1})
    with pytest.raises(redis.ResponseError):
        store.apply(commit)
    after = PartitionStore(redis_client, keys, "total", 0)
    assert after.committed is None
    assert after.get("s", key_group("alice", 128), "alice") is MISSING


def test_a_zombie_reads_nothing_the_winner_committed(redis_client):
    """Both open at offset 2 with alice at 12; the winner commits 17; the zombie's read of
    alice (lazy, after that commit) is fenced, so it cannot emit a total of 17 + 5."""
    keys = Keys("zombie1")
    seed = PartitionStore(redis_client, keys, "total", 0)
    _add(seed, "alice", 12)
    assert seed.commit(2, owner=0)
    winner = PartitionStore(redis_client, keys, "total", 0)
    zombie = PartitionStore(redis_client, keys, "total", 0)
    assert _add(winner, "alice", 5) == 17
    assert winner.commit(3, owner=0)
    with pytest.raises(Fenced):
        _add(zombie, "alice", 5)


def test_a_zombie_reads_no_open_window_the_winner_committed(redis_client):
    """Both open at offset 2 with one window open to 10; the winner opens one to 5 and
    commits: the zombie's first look at the open windows (lazy, after that commit) is
    fenced, so it cannot hold its output back, or judge an event late, by the winner's
    window; the winner's successor reads both."""
    keys = Keys("zombie2")
    seed = PartitionStore(redis_client, keys, "w", 0)
    seed.set_end(0, "a", 10.0)
    assert seed.commit(2, owner=0)
    winner = PartitionStore(redis_client, keys, "w", 0)
    zombie = PartitionStore(redis_client, keys, "w", 0)
    winner.set_end(1, "b", 5.0)
    assert winner.oldest_end() == 5.0
    assert winner.commit(3, owner=0)
    with pytest.raises(Fenced):
        zombie.oldest_end()
    assert PartitionStore(redis_client, keys, "w", 0).oldest_end() == 5.0


def test_an_applied_id_is_known_when_it_comes_again(redis_client):
    keys = Keys("ids1")
    store = PartitionStore(redis_client, keys, "total", 0)
    assert not store.applied("e1")
    _add(store, "alice", 5)
    store.mark_applied("e1")
    assert store.commit(1, owner=0)
    later = PartitionStore(redis_client, keys, "total", 0)
    later.prefetch([], ["e1", "e2"])
    assert later.applied("e1") and not later.applied("e2")


def test_closing_windows_reads_their_accumulators_in_one_round_trip(redis_client):
    """400 keys' windows [0, 10) committed; closing them costs one script call for the
    accumulators (and one for the index), not one HGET each."""
    agg = _aggregator("many", {"tumbling_s": 10})
    keys = Keys("many1")
    store = PartitionStore(redis_client, keys, "many", 0)
    for k in range(400):
        agg.add(store, {"k": f"k{k}"}, 5.0)
    assert store.oldest_end() == 10.0  # (the index's script loaded: not counted below)
    assert store.commit(400, owner=0)
    closing = PartitionStore(redis_client, keys, "many", 0)
    sent: list[str] = []
    real = redis_client.execute_command

    def counted(*args, **kwargs):
        sent.append(str(args[0]))
        return real(*args, **kwargs)

    redis_client.execute_command = counted
    try:
        fired = agg.fire(closing, 10.0)
    finally:
        redis_client.execute_command = real
    assert len(fired) == 400 and {r.payload["value"] for r in fired} == {1}
    assert sent == ["EVALSHA", "EVALSHA"]  # the index, then every accumulator


def test_a_keys_state_expires_in_redis_after_its_ttl(redis_client):
    """state_ttl_s 30 through the engine's core on a Redis partition: alice at 0, bob at
    20; the watermark 35 expires alice (0 + 30) and keeps bob (50), committed."""
    from elastic_sps.io.watermarks import Declaration
    from elastic_sps.pipeline.chain import open_runnable
    from elastic_sps.pipeline.engine import Event, OperatorCore
    from elastic_sps.pipeline.operators import Context

    op = {"name": "t", "et_ms": 1, "key": "field:k", "state_ttl_s": 30,
          "code": "tests.support.keyed_ops:running_total"}  # fmt: skip
    topo = topology.from_dict({"operators": [op], "edges": [{"from": "source", "to": "t"}]})
    core = OperatorCore(topo, "t", open_runnable(topo, "t", Context("t")))
    keys = Keys("ttl1")
    store = PartitionStore(redis_client, keys, "t", 0)
    valve = core.valve(store)
    for i, (k, t) in enumerate((("alice", 0.0), ("bob", 20.0))):
        core.apply(Event(f"e{i}", {"k": k, "v": 1, "sent": 0}, t), Context("t"), store, [])
    core.declare(valve, Declaration("source", 0, 1, 35.0), store)
    assert core.expire(valve, store) == 1
    assert store.commit(2, owner=0)
    after = PartitionStore(redis_client, keys, "t", 0)
    assert KeyState(after, key_group("alice", 128), "alice") == {}
    assert KeyState(after, key_group("bob", 128), "bob")["total"] == 1
    assert after.oldest_end() == 50.0


def test_a_repeat_and_a_raise_leave_redis_state_as_once_and_untouched(redis_client):
    """Through the engine's core on a Redis partition: v 10 applied and committed; the
    same event again at a later offset (an upstream retry) is a repeat; v 99 raises
    after writing: the total stays 10, the list [10]."""
    from elastic_sps.pipeline.chain import open_runnable
    from elastic_sps.pipeline.engine import Event, OperatorCore
    from elastic_sps.pipeline.operators import Context

    op = {"name": "b", "et_ms": 1, "key": "field:k",
          "code": "tests.support.engine_ops:write_then_raise"}  # fmt: skip
    topo = topology.from_dict({"operators": [op], "edges": [{"from": "source", "to": "b"}]})
    core = OperatorCore(topo, "b", open_runnable(topo, "b", Context("b")))
    keys = Keys("once1")
    first = PartitionStore(redis_client, keys, "b", 0)
    core.apply(Event("e1", {"k": "x", "v": 10}, 1.0), Context("b"), first, [])
    assert first.commit(1, owner=0)
    again = PartitionStore(redis_client, keys, "b", 0)
    assert core.repeat(Event("e1", {"k": "x", "v": 10}, 1.0), again)
    with pytest.raises(ValueError, match="too large"):
        core.apply(Event("e2", {"k": "x", "v": 99}, 2.0), Context("b"), again, [])
    assert again.commit(3, owner=0)
    after = PartitionStore(redis_client, keys, "b", 0)
    assert dict(KeyState(after, key_group("x", 128), "x")) == {"total": 10, "seen": [10]}


def test_more_reads_and_writes_than_a_script_block_holds_round_trip(redis_client):
    """2,500 keys of one group and 1,500 ids in one task (the scripts take 1,000
    arguments a block): every value and every id comes back as written, in the next
    task; a hash field deleted stays deleted."""
    keys = Keys("blocks")
    first = PartitionStore(redis_client, keys, "total", 0)
    names = [f"k{j}" for j in range(2500)]
    first.prefetch([("s", 7, n) for n in names], [f"e{j}" for j in range(1500)])
    assert not any(first.applied(f"e{j}") for j in range(1500))
    for j, n in enumerate(names):
        first.put("s", 7, n, {"n": j})
    for j in range(1500):
        first.mark_applied(f"e{j}")
    assert first.commit(10, owner=0)
    second = PartitionStore(redis_client, keys, "total", 0)
    second.prefetch([("s", 7, n) for n in names] + [("s", 8, "k0")], ["e0", "e1499", "e1500"])
    assert [second.get("s", 7, n)["n"] for n in names] == list(range(2500))
    assert second.get("s", 8, "k0") is MISSING
    assert (second.applied("e0"), second.applied("e1499"), second.applied("e1500")) == (
        True,
        True,
        False,
    )
    second.delete("s", 7, "k3")
    assert second.commit(11, owner=0)
    third = PartitionStore(redis_client, keys, "total", 0)
    assert third.get("s", 7, "k3") is MISSING
    assert third.get("s", 7, "k4") == {"n": 4}


def test_open_windows_by_end_across_a_commit_and_a_reopen(redis_client):
    """Windows at 10 and 20 committed; the next task's store adds one at 5 and drops the
    one at 10 before committing: the oldest and the due come from both."""
    keys = Keys("byend1")
    first = PartitionStore(redis_client, keys, "w", 0)
    first.set_end(0, "a", 10.0)
    first.set_end(1, "b", 20.0)
    assert first.oldest_end() == 10.0
    assert first.commit(5, owner=0)
    second = PartitionStore(redis_client, keys, "w", 0)
    assert second.oldest_end() == 10.0  # the committed index, read once
    second.set_end(2, "c", 5.0)
    assert second.oldest_end() == 5.0
    second.set_end(0, "a", None)
    assert second.due(20.0) == [(2, "c", 5.0), (1, "b", 20.0)]
    second.set_end(2, "c", None)
    second.set_end(1, "b", None)
    assert second.oldest_end() is None
    assert second.commit(9, owner=0)
    assert PartitionStore(redis_client, keys, "w", 0).oldest_end() is None


def test_windows_of_a_cut_stay_open_while_its_commit_waits(redis_client):
    """A window at 10 opened, then a cut (``prepare``) before the index was ever read:
    until the commit applies, the store still knows the window is open (before, the cut
    took it off the buffers and a read of the committed index missed it)."""
    keys = Keys("byend2")
    store = PartitionStore(redis_client, keys, "w", 0)
    store.set_end(0, "a", 10.0)
    prepared = store.prepare(3, owner=0)
    assert store.oldest_end() == 10.0  # read between the cut and its commit
    assert store.apply(prepared)
    assert store.due(10.0) == [(0, "a", 10.0)]
    assert PartitionStore(redis_client, keys, "w", 0).oldest_end() == 10.0
