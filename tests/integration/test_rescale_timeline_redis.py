"""The rescale timeline over a real redis-server: execute's marker, the reader's effect,
recorded once, and the /metrics histogram counted as changes happen."""

import pytest

from elastic_sps.contracts.plan import PlanRecord
from elastic_sps.io import rescale_timeline
from elastic_sps.io.knowledge_base import Keys
from elastic_sps.model import topology
from elastic_sps.services.execute.core import Executor

pytestmark = pytest.mark.integration
TOPO = topology.load("twitter")


def test_effects_are_recorded_once_and_counted_in_the_histogram(redis_client):
    """Two changes decided at 100 s take effect 0.3 s and 1.5 s later: the histogram
    holds one in the 0.5 s bucket, both from 2 s on, sum 1.8 s; a second reader of the
    same batch records nothing."""
    keys = Keys("timeline")
    ex = Executor(redis_client, TOPO, keys)
    ex.bootstrap()
    targets = {n: 1 for n in TOPO.names} | {"parse": 3, "store": 2}
    ex.apply(PlanRecord(plan_id="p1", interval=1, targets=targets, closed_at=0, decided_at=100.0))
    first = rescale_timeline.record_effect(redis_client, keys, "parse", 3, now=100.3)
    assert first is not None and first.decision_to_effect_s == pytest.approx(0.3)
    assert rescale_timeline.record_effect(redis_client, keys, "parse", 3, now=100.4) is None
    assert rescale_timeline.record_effect(redis_client, keys, "store", 1, now=100.5) is None
    assert rescale_timeline.record_effect(redis_client, keys, "store", 2, now=101.5)
    buckets, total = rescale_timeline.read_histogram(redis_client, keys)
    got = dict(buckets)
    assert got["0.25"] == 0 and got["0.5"] == 1 and got["1.0"] == 1
    assert got["2.0"] == 2 and got["+Inf"] == 2
    assert total == pytest.approx(1.8)
    assert len(rescale_timeline.read(redis_client, keys)) == 2


def test_a_router_records_a_count_it_had_not_seen_and_only_that(redis_client):
    """A router first sees parse at 1 (no change: the stream reader records that one),
    then execute applies 1 -> 4: the router's next read of 4 is the change's effect; a
    read of 4 again is not a change."""
    keys = Keys("watch")
    ex = Executor(redis_client, TOPO, keys)
    ex.bootstrap()
    watch = rescale_timeline.CountWatch(redis_client, keys)
    assert watch.see("parse", 1) is False
    targets = {n: 1 for n in TOPO.names} | {"parse": 4}
    ex.apply(PlanRecord(plan_id="p1", interval=1, targets=targets, closed_at=0, decided_at=1.0))
    assert watch.see("parse", 4) is True
    assert watch.see("parse", 4) is False
    (change,) = rescale_timeline.read(redis_client, keys)
    assert (change.operator, change.before, change.after) == ("parse", 1, 4)
