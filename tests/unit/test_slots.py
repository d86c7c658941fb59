"""Packing replica slots into Spark tasks, and a replica's occupancy clock."""

from __future__ import annotations

import time

import pytest

from elastic_sps.services.dataplane.occupancy import Occupancy
from elastic_sps.services.dataplane.slots import (
    Slot,
    max_events_per_slot,
    pack,
    plan_slots,
    planned_occupancy,
    serve_seconds,
)
from elastic_sps.services.dataplane.steps import writes_due

pytestmark = pytest.mark.unit


def test_active_slots_and_draining_inactive_ones():
    start = {"0": 10, "1": 0, "2": 5, "3": 7}
    end = {"0": 20, "1": 0, "2": 9, "3": 7}
    slots = plan_slots(start, end, pool=4, active=2)
    # slots 0 and 1 are active (1 has nothing); 2 is inactive but holds 4 events; 3 is empty
    assert slots == [Slot(0, 10, 20), Slot(1, 0, 0), Slot(2, 5, 9, drain=True)]


def test_standby_slots_wait_in_the_window_for_a_scale_out():
    """With a window, the empty inactive slot 3 is served too (standby), so events routed
    to it after a scale-out are processed in this batch; slot 2, inactive with events
    left, is served alike (its range, then what still reaches it: a watermark
    declaration arriving during the window is read in it, not one window later), and a
    windowed pack keeps the standby slots."""
    start = {"0": 10, "1": 0, "2": 5, "3": 7}
    end = {"0": 20, "1": 0, "2": 9, "3": 7}
    slots = plan_slots(start, end, pool=4, active=2, standby=True)
    assert slots == [
        Slot(0, 10, 20),
        Slot(1, 0, 0),
        Slot(2, 5, 9, standby=True),
        Slot(3, 7, 7, standby=True),
    ]
    assert [s.replica for g in pack(slots, tasks=1, keep_idle=True) for s in g] == [0, 2, 1, 3]


def test_pack_spreads_work_largest_first_and_skips_idle_slots():
    slots = [Slot(0, 0, 10), Slot(1, 0, 0), Slot(2, 0, 6), Slot(3, 0, 5), Slot(4, 0, 4)]
    groups = pack(slots, tasks=2)
    # LPT: 10 -> A; 6 -> B; 5 -> B (6 < 10); 4 -> A (10 < 11): loads 14 and 11
    assert [[s.replica for s in g] for g in groups] == [[0, 4], [2, 3]]
    assert pack(slots, tasks=1) == [(slots[0], slots[2], slots[3], slots[4])]


def test_with_overlaps_a_slot_starts_where_its_partition_was_processed_even_behind_spark():
    """Spark's offsets 100, 100, 50; progress 80 (a window that outlived its task ended
    before the end its next task was planned with), 120, none: the slots start at 80,
    120 and Spark's 50; without ``from_progress``, never behind Spark (100, 120, 50)."""
    start, end = {"0": 100, "1": 100, "2": 50}, {"0": 150, "1": 110, "2": 60}
    progress = {"0": 80, "1": 120}
    slots = plan_slots(start, end, pool=3, active=3, progress=progress, from_progress=True)
    assert [(s.start, s.end) for s in slots] == [(80, 150), (120, 120), (50, 60)]
    slots = plan_slots(start, end, pool=3, active=3, progress=progress)
    assert [(s.start, s.end) for s in slots] == [(100, 150), (120, 120), (50, 60)]


def test_a_stable_pack_deals_the_replicas_round_the_groups_whatever_their_load():
    """Replicas 0, 2, 3, 4 with 10, 6, 5, 4 events; replica 1 with none, left out as
    LPT does; a keyed replica's two partitions (5 and 6, owner 4) stay together."""
    slots = [Slot(0, 0, 10), Slot(1, 0, 0), Slot(2, 0, 6), Slot(3, 0, 5), Slot(4, 0, 4)]
    groups = pack(slots, tasks=2, stable=True)
    assert [[s.replica for s in g] for g in groups] == [[0, 3], [2, 4]]
    shifted = [Slot(0, 0, 1), Slot(2, 0, 60), Slot(3, 0, 50), Slot(4, 0, 40)]
    assert [[s.replica for s in g] for g in pack(shifted, tasks=2, stable=True)] == [
        [0, 3],
        [2, 4],
    ]
    keyed = [Slot(5, 0, 3, owner=4), Slot(6, 0, 1, owner=4), Slot(0, 0, 2, owner=0)]
    assert [[s.replica for s in g] for g in pack(keyed, tasks=2, stable=True)] == [[0], [5, 6]]


def test_pack_plans_one_empty_task_when_nothing_is_there():
    assert pack([Slot(0, 3, 3)], tasks=4) == [()]


def test_a_batch_holds_about_max_batch_s_of_one_replica_work():
    assert max_events_per_slot("wait", 0.005, 1.0, 20_000) == 200
    assert max_events_per_slot("none", 0.005, 1.0, 20_000) == 20_000
    assert max_events_per_slot("cpu", 0.5, 0.2, 20_000) == 1


def test_every_task_serves_as_long_as_the_longest_planned_slot():
    """A spike: classify_content's slot 0 holds 90 events at 10 ms (0.9 s of work), parse's
    slots 20 and 0 events at 5 ms (0.1 s, 0 s). With a 0.6 s window every task of the
    batch serves 0.9 s, since the batch lasts that long anyway; at rest (0.1 s of work)
    the window holds. Without a per-event cost the work is unknown: the window."""
    content = planned_occupancy([Slot(0, 10, 100), Slot(1, 5, 35)], "wait", 0.010)
    parse = planned_occupancy([Slot(0, 0, 20), Slot(1, 4, 4)], "wait", 0.005)
    assert content == pytest.approx([0.9, 0.3])
    assert parse == pytest.approx([0.1, 0.0])
    assert serve_seconds(0.6, content + parse) == pytest.approx(0.9)
    assert serve_seconds(0.6, parse) == pytest.approx(0.6)
    assert planned_occupancy([Slot(0, 0, 500)], "none", 0.010) == []
    assert serve_seconds(0.6, []) == pytest.approx(0.6)


def test_wait_mode_occupies_the_replica_et_per_event():
    clock = Occupancy("wait", 0.01)
    t0 = time.perf_counter()
    busy = sum(clock.end(now := time.perf_counter(), now) for _ in range(20))
    clock.settle()
    # 20 events x 10 ms: the replica is busy 200 ms, and no less wall time passes
    assert busy == pytest.approx(0.2)
    assert time.perf_counter() - t0 >= 0.2


def test_a_slot_starts_where_processing_really_got_to():
    # Spark's offsets say 10 and 5; tasks with a window read on to 14 and 9 (progress).
    start, end = {"0": 10, "1": 5, "2": 3}, {"0": 20, "1": 9, "2": 3}
    slots = plan_slots(start, end, pool=3, active=2, progress={"0": 14, "1": 9, "2": 1})
    # slot 0 reads 14..20; slot 1 has nothing left; inactive 2 is behind Spark's offset,
    # which wins (a lost progress record never rewinds)
    assert slots == [Slot(0, 14, 20), Slot(1, 9, 9)]


def test_a_replayed_batch_does_not_read_again_what_an_epoch_served_past_its_end():
    # the driver restarted: Spark replays a batch planned to end at 20, but the killed
    # epoch's live reading had processed (and checkpointed) up to 35
    slots = plan_slots({"0": 10}, {"0": 20}, pool=1, active=1, progress={"0": 35})
    assert slots == [Slot(0, 35, 35)]  # its live reading starts at 35


def test_pack_keeps_idle_live_slots_when_tasks_read_a_window():
    slots = [Slot(0, 0, 10), Slot(1, 0, 0), Slot(2, 0, 0), Slot(3, 0, 0, drain=True)]
    # idle slots 1 and 2 get a task each (they read what arrives); an empty drain none
    assert [[s.replica for s in g] for g in pack(slots, tasks=3, keep_idle=True)] == [
        [0],
        [1],
        [2],
    ]
    assert [[s.replica for s in g] for g in pack(slots, tasks=2, keep_idle=True)] == [
        [0],
        [1, 2],
    ]


def test_an_event_arriving_at_an_idle_replica_owes_nothing_for_the_gap():
    clock = Occupancy("none", 0.01)
    clock.free_at = 100.0
    clock.arrive(99.0)  # arrived while the replica was still busy: it waits its turn
    assert clock.free_at == 100.0
    clock.arrive(105.0)  # arrived after the replica went idle: it starts then
    assert clock.free_at == 105.0


def test_an_operators_writes_go_out_every_500_or_every_tenth_of_a_second():
    assert not writes_due(499, 0.05)
    assert writes_due(500, 0.0)
    assert writes_due(1, 0.1)
    assert not writes_due(0, 5.0)  # nothing stacked: no round trip
