"""Packing replica slots into Spark tasks, and a replica's occupancy clock."""

from __future__ import annotations

import time

import pytest

from services.dataplane.replica import Occupancy
from services.dataplane.slots import Slot, max_events_per_slot, pack, plan_slots

pytestmark = pytest.mark.unit


def test_active_slots_and_draining_inactive_ones():
    start = {"0": 10, "1": 0, "2": 5, "3": 7}
    end = {"0": 20, "1": 0, "2": 9, "3": 7}
    slots = plan_slots(start, end, pool=4, active=2)
    # slots 0 and 1 are active (1 has nothing); 2 is inactive but holds 4 events; 3 is empty
    assert slots == [Slot(0, 10, 20), Slot(1, 0, 0), Slot(2, 5, 9, drain=True)]


def test_pack_spreads_work_largest_first_and_skips_idle_slots():
    slots = [Slot(0, 0, 10), Slot(1, 0, 0), Slot(2, 0, 6), Slot(3, 0, 5), Slot(4, 0, 4)]
    groups = pack(slots, tasks=2)
    # LPT: 10 -> A; 6 -> B; 5 -> B (6 < 10); 4 -> A (10 < 11): loads 14 and 11
    assert [[s.replica for s in g] for g in groups] == [[0, 4], [2, 3]]
    assert pack(slots, tasks=1) == [(slots[0], slots[2], slots[3], slots[4])]


def test_pack_plans_one_empty_task_when_nothing_is_there():
    assert pack([Slot(0, 3, 3)], tasks=4) == [()]


def test_a_batch_holds_about_max_batch_s_of_one_replica_work():
    assert max_events_per_slot("wait", 0.005, 1.0, 20_000) == 200
    assert max_events_per_slot("none", 0.005, 1.0, 20_000) == 20_000
    assert max_events_per_slot("cpu", 0.5, 0.2, 20_000) == 1


def test_wait_mode_occupies_the_replica_et_per_event():
    clock = Occupancy("wait", 0.01)
    t0 = time.perf_counter()
    busy = sum(clock.end(time.perf_counter()) for _ in range(20))
    clock.settle()
    # 20 events x 10 ms: the replica is busy 200 ms, and no less wall time passes
    assert busy == pytest.approx(0.2)
    assert time.perf_counter() - t0 >= 0.2
