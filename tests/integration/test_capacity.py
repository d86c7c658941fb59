"""A replica is a unit of capacity, against the real broker, redis-server and Spark:
four active replicas of a waiting operator process at least three times what one does;
an operator doing real CPU work is measured CPU-bound at start, and the plan gives it no
more replicas than the machine has cores."""

from __future__ import annotations

import pytest

from tests.support.capacity import CPU_CODE, OPERATOR, capacity_rig

pytestmark = [pytest.mark.integration, pytest.mark.engine]


def test_four_replicas_process_at_least_three_times_one(kafka_bootstrap, redis_url, tmp_path):
    """``wait`` cost (each event occupies its replica 5 ms, no CPU): 4 s of capacity at
    1 and at 4 active replicas of a pool of 8; four give at least 3x the events/s of one
    (replicas that wait overlap, whatever the cores)."""
    with capacity_rig(kafka_bootstrap, redis_url, tmp_path, et_ms=5.0, pool=8) as rig:
        one = rig.measure(1, seconds=4)
        four = rig.measure(4, seconds=4)
    assert four >= 3 * one, f"1 replica {one:.0f} events/s, 4 replicas {four:.0f} events/s"


def test_a_cpu_bound_operator_gets_no_more_replicas_than_the_cores(
    kafka_bootstrap, redis_url, tmp_path
):
    """A user function doing pure-Python CPU work (``cpu_work.burn``, its cost left out
    of the topology): two replicas serve it; the dataplane's cost measurement at start
    finds it CPU-bound (CPU share >= 0.5); a plan for 8 replicas of it on 2 cores gives
    it 2, limited by ``cores``."""
    import redis

    from elastic_sps.control.plan import make_plan
    from elastic_sps.model import topology
    from elastic_sps.pipeline.costs import resolved
    from elastic_sps.policies.base import Analysis, OperatorDecision

    with capacity_rig(kafka_bootstrap, redis_url, tmp_path, 2.0, pool=8, code=CPU_CODE) as rig:
        assert rig.measure(2, seconds=1) > 0  # two replicas serve it
        measured = resolved(
            topology.load(tmp_path / "capacity.yaml"),
            redis.Redis.from_url(redis_url),
            rig.keys.prefix,
            10,
        )
    assert measured[OPERATOR].cpu_share >= 0.5, measured[OPERATOR]
    need = {OPERATOR: OperatorDecision(8, 8000.0, 8.0)}
    plan = make_plan(measured, Analysis(0, 8000.0, need), {OPERATOR: 1}, 1.0, cores=2)
    assert plan.targets[OPERATOR] == 2
    assert plan.limited.get(OPERATOR) == "cores"
