"""A task's epoch (``elastic_sps.services.dataplane.replica``): a retried task starts where
the failed attempt checkpointed; a replica takes what its feed holds, comes back
empty-handed when a checkpoint falls due or a held declaration may go, and stops at the
deadline or at the reader's end of the window."""

from __future__ import annotations

import time

import pytest

from elastic_sps.services.dataplane.feed import WINDOW_END, Batch, Feed
from elastic_sps.services.dataplane.replica import CHUNK, Epoch, Span, _take, resumed
from elastic_sps.services.dataplane.slots import Slot

pytestmark = pytest.mark.unit


def feed_of(*items: object) -> Feed:
    q = Feed()
    for item in items:
        if isinstance(item, Batch):
            q.put_batch(item)
        else:
            q.put(item)
    return q


def batch(n: int) -> Batch:
    return Batch(list(range(n)), 0.0)


def test_a_checkpoint_is_due_once_its_interval_has_passed():
    epoch = Epoch(deadline=100.0, checkpoint_s=1.0, last=10.0)
    assert not epoch.due(10.9)
    assert epoch.due(11.0)
    assert not Epoch(deadline=100.0, checkpoint_s=0.0, last=10.0).due(50.0)  # 0: at the end


def test_replicas_started_together_first_checkpoint_a_share_of_an_interval_apart(monkeypatch):
    monkeypatch.setattr(time, "monotonic", lambda: 100.0)
    span = Span(160.0)
    firsts = [Epoch.staggered(span, 2.0, i, 4).last + 2.0 for i in range(5)]
    assert firsts == [102.0, 101.5, 101.0, 100.5, 102.0]  # replica 4 of a pool of 4 as 0
    assert Epoch.staggered(span, 2.0, 3, 4).end() == 160.0
    assert Epoch.staggered(span, 0.0, 3, 4).last == 100.0  # no checkpoints inside: no phase


def test_a_take_waits_until_the_next_checkpoint_or_the_deadline_whichever_is_first():
    assert Epoch(deadline=100.0, checkpoint_s=1.0, last=10.0).wait_s(10.25) == 0.75
    assert Epoch(deadline=10.5, checkpoint_s=1.0, last=10.0).wait_s(10.25) == 0.25
    assert Epoch(deadline=20.0, checkpoint_s=0.0, last=10.0).wait_s(12.0) == 8.0
    assert Epoch(deadline=20.0, checkpoint_s=1.0, last=10.0).wait_s(30.0) == 0.0


def test_what_waits_is_taken_up_to_the_end_of_the_window():
    far = Epoch(deadline=time.monotonic() + 60, checkpoint_s=30.0)
    a, b = Batch(["a"], 1.0), Batch(["b"], 2.0)
    feed = feed_of(a, b, WINDOW_END)  # the reader's end comes last
    assert _take(feed, far) == [a, b]
    assert _take(feed, far) is None  # the end, seen again


def test_taking_stops_once_a_chunk_holds_chunk_records_and_the_feed_counts_them():
    far = Epoch(deadline=time.monotonic() + 60, checkpoint_s=30.0)
    feed = feed_of(batch(CHUNK - 1), batch(2), batch(1))
    assert feed.records() == CHUNK + 2
    first = _take(feed, far) or []
    assert [len(b.records) for b in first] == [CHUNK - 1, 2]  # CHUNK + 1: a batch is whole
    assert feed.records() == 1
    assert [len(b.records) for b in _take(feed, far) or []] == [1]
    assert feed.records() == 0


def test_an_empty_feed_gives_nothing_when_a_checkpoint_is_due():
    due = Epoch(deadline=time.monotonic() + 60, checkpoint_s=1.0, last=time.monotonic() - 5)
    assert _take(feed_of(), due) == []


def test_past_the_deadline_the_epoch_is_over_and_a_late_record_is_left():
    over = Epoch(deadline=time.monotonic() - 1, checkpoint_s=1.0)
    assert _take(feed_of(), over) is None
    assert _take(feed_of(batch(1)), over) is None  # read again by the next task


def test_an_empty_feed_gives_nothing_when_a_held_declaration_may_go():
    far = Epoch(deadline=time.monotonic() + 60, checkpoint_s=30.0)
    assert _take(feed_of(), far, wake_at=time.monotonic() - 0.1) == []


def test_a_retried_task_starts_its_slots_where_their_partitions_were_checkpointed():
    planned = (Slot(0, 10, 20), Slot(1, 5, 5, standby=True), Slot(2, 30, 40))
    # Redis's bytes: partition 0 checkpointed inside the planned range, 1 past it, 2 before
    committed = {b"0": b"15", b"1": b"8", b"2": b"25"}
    assert resumed(planned, committed) == (
        Slot(0, 15, 20),
        Slot(1, 8, 8, standby=True),
        Slot(2, 30, 40),
    )
    assert resumed(planned, {}) == planned
