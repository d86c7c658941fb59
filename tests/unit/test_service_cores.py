import pytest

from elastic_sps.contracts.base import ContractError, decode, encode
from elastic_sps.contracts.metrics import OperatorCounters
from elastic_sps.contracts.plan import PlanRecord, RescaleRequest
from elastic_sps.contracts.stats import StatsRecord
from elastic_sps.model import topology
from elastic_sps.services.analyze.core import Analyzer
from elastic_sps.services.monitor.core import Closer, IntervalAggregator
from elastic_sps.services.plan.core import Planner

pytestmark = pytest.mark.unit

TOPO = topology.load("twitter")


def rec(interval, op, processed, **kw):
    return OperatorCounters(interval=interval, operator=op, processed=processed, **kw)


def test_monitor_sums_replicas_and_reports_silent_operators():
    agg = IntervalAggregator(TOPO, td=1.0)
    agg.add(rec(10, "source", 100))
    agg.add(rec(10, "parse", 60, replica=0, received_from={"source": 60}, busy_s=0.03))
    agg.add(
        rec(
            10, "parse", 40, replica=1, received_from={"source": 40}, busy_s=0.02, active_replicas=2
        )
    )
    # the ingress's count of 10 is in (it is sent once 10 is over): 10 may close, though
    # the wall clock is far behind; 11 may not until its own count arrives
    assert agg.due(now=0) == [10]
    agg.add(rec(11, "parse", 5, replica=0, received_from={"source": 5}))
    assert agg.due(now=0) == [10]
    st = agg.close(10, now=0)
    assert st.input_events == 100
    assert st.operators["parse"].processed == 100
    assert st.operators["parse"].received == 100
    assert st.operators["parse"].et_ms == pytest.approx(0.5)
    assert st.operators["parse"].active_replicas == 2
    assert st.operators["store"].silent
    assert not st.operators["parse"].silent


def test_monitor_folds_late_records_into_the_next_interval():
    agg = IntervalAggregator(TOPO, td=1.0)
    agg.add(rec(1, "source", 10))
    agg.add(rec(2, "source", 10))
    agg.close(1, now=0)
    agg.add(rec(1, "source", 7))  # late
    st = agg.close(2, now=0)
    assert st.input_events == 17
    assert st.late_records == 1
    assert agg.late_total == 1


def test_a_late_source_count_does_not_close_the_interval_it_is_folded_into():
    """Interval 1's count arrived in two parts (the ingress read a record stamped in 1
    after publishing 1). The second part is folded into 2, but 2 is not over: it closes
    on 2's own count, not on the late part of 1's (that closed every later interval one
    second early, and each count after it was late in turn: λ_G error 0.53 live)."""
    agg = IntervalAggregator(TOPO, td=1.0)
    agg.add(rec(1, "source", 140))
    agg.close(1, now=2.1)
    agg.add(rec(1, "source", 3))  # late: the ingress read it after publishing 1
    assert agg.due(now=2.15) == []
    agg.add(rec(2, "source", 138))
    assert agg.due(now=3.1) == [2]
    assert agg.close(2, now=3.1).input_events == 141


def test_monitor_closes_by_wall_clock_and_emits_gaps():
    agg = IntervalAggregator(TOPO, td=1.0)
    agg.add(rec(100, "source", 1))
    assert agg.due(now=103.0, grace_s=0.5) == [100, 101]
    agg.close(100, now=0)
    gap = agg.close(101, now=0)
    assert gap.input_events == 0 and all(o.silent for o in gap.operators.values())


def test_two_flushes_at_once_close_each_interval_once_and_in_order():
    """A record and the timer both flush while a send is awaited: before the lock the
    second flush closed 100 and 101 and the first then closed 100 again (a crash live)."""
    import asyncio

    agg = IntervalAggregator(TOPO, td=1.0)
    agg.add(rec(100, "source", 1))
    sent: list[int] = []

    async def slow_send(st: StatsRecord) -> None:
        await asyncio.sleep(0.01)  # the producer's await, where the other flush runs
        sent.append(st.interval)

    async def both() -> None:
        closer = Closer(agg, slow_send)
        await asyncio.gather(closer.flush(0.5, now=103.0), closer.flush(0.5, now=103.0))

    asyncio.run(both())
    assert sent == [100, 101]
    assert agg.next_to_close == 102


def test_monitor_refuses_unknown_operator():
    agg = IntervalAggregator(TOPO, td=1.0)
    assert not agg.add(rec(1, "nope", 1))


def stats(interval, rate):
    agg = IntervalAggregator(TOPO, td=1.0)
    agg.add(rec(interval, "source", rate))
    prev = "source"
    for op in TOPO.names:
        agg.add(rec(interval, op, rate, received_from={prev: rate}, emitted=rate))
        prev = op
    return agg.close(interval, now=0)


def test_analyzer_orders_intervals_and_drops_replays():
    an = Analyzer(TOPO, "pa-sps", "basic", max_hold=3)
    assert [a.interval for a in an.offer(stats(5, 100))] == [5]
    assert an.offer(stats(7, 100)) == []  # 6 missing: held
    assert [a.interval for a in an.offer(stats(6, 100))] == [6, 7]
    assert an.offer(stats(6, 100)) == []  # replay
    an.offer(stats(9, 100))
    an.offer(stats(10, 100))
    out = an.offer(stats(11, 100))  # 8 never came: skipped after max_hold
    assert [a.interval for a in out] == [9, 10, 11]
    assert an.skipped == 1


def test_analysis_to_plan_matches_the_model():
    an = Analyzer(TOPO, "pa-sps", "basic")
    (analysis,) = an.offer(stats(1, 1500))
    plan = Planner(TOPO).plan(analysis)
    assert plan.plan_id == "interval-1"
    assert plan.targets["classify_content"] == 4  # 1500 × 2.5 ms
    assert Planner(TOPO, budget=6).plan(analysis).budget_bound


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"schema_name": "sps.stats", "version": 1}', "schema_name 'sps.stats'"),
        (b'{"schema_name": "sps.metrics", "version": 9}', "version 9 unsupported"),
        (b'{"schema_name": "sps.metrics", "interval": -1, "operator": "a"}', "interval"),
        (b'{"schema_name": "sps.metrics", "interval": 1, "operator": "a", "extra": 1}', "extra"),
        (None, "empty record"),
    ],
)
def test_contract_errors_say_what_is_wrong(raw, needle):
    with pytest.raises(ContractError, match=needle):
        decode(raw, OperatorCounters)


def test_contract_roundtrip():
    st = stats(3, 50)
    assert decode(encode(st), StatsRecord) == st
    p = PlanRecord(plan_id="x", interval=1, targets={"a": 2}, closed_at=0)
    assert decode(encode(p), PlanRecord) == p
    with pytest.raises(ValueError):
        RescaleRequest(request_id="r", add=1, remove=1)


def test_monitor_carries_active_count_of_a_silent_operator():
    agg = IntervalAggregator(TOPO, td=1.0)
    agg.add(rec(1, "store", 10, received_from={"classify_author": 10}, active_replicas=3))
    agg.add(rec(2, "source", 1))
    agg.add(rec(3, "source", 1))
    assert agg.close(1, now=0).operators["store"].active_replicas == 3
    silent = agg.close(2, now=0).operators["store"]
    assert silent.silent and silent.active_replicas == 3


def test_monitor_carries_each_replicas_queue_until_it_reports_again():
    """A queue is a level: replica 0 reports 500 waiting in interval 1 and nothing in 2
    (its micro-batch outlasts the interval), so 2 still has 500, not an empty queue;
    in 3 it reports 120. Replica 2's 80 is dropped once only 2 replicas are active."""
    agg = IntervalAggregator(TOPO, td=1.0)
    cc = "classify_content"
    agg.add(rec(1, cc, 10, replica=0, queued=500.0, active_replicas=3))
    agg.add(rec(1, cc, 10, replica=2, queued=80.0, active_replicas=3))
    agg.add(rec(2, "source", 1))
    agg.add(rec(3, cc, 40, replica=0, queued=120.0, active_replicas=2))
    agg.add(rec(4, "source", 1))
    assert agg.close(1, now=0).operators[cc].queued == 580.0
    assert agg.close(2, now=0).operators[cc].queued == 580.0
    assert agg.close(3, now=0).operators[cc].queued == 120.0
