"""A replica is a unit of capacity: against the real broker, redis-server and Spark, with
``wait`` cost (each event occupies its replica 5 ms), 4 active replicas of one operator
process at least 3× what 1 does in the same time."""

from __future__ import annotations

import pytest

from tests.support.capacity import capacity_rig

pytestmark = pytest.mark.integration


def test_four_replicas_process_at_least_three_times_one(kafka_bootstrap, redis_url, tmp_path):
    with capacity_rig(kafka_bootstrap, redis_url, tmp_path, et_ms=5.0, pool=8) as rig:
        one = rig.measure(1, seconds=4)
        four = rig.measure(4, seconds=4)
    assert four >= 3 * one, f"1 replica {one:.0f} events/s, 4 replicas {four:.0f} events/s"
