import pytest

from elastic_sps.model import topology
from elastic_sps.services.ensemble import report

pytestmark = pytest.mark.unit
TOPO = topology.load("twitter")


def stat(k, inp, proc, active=1):
    ops = {
        n: {"received": proc, "processed": proc, "active_replicas": active, "queued": 0}
        for n in TOPO.names
    }
    return {"interval": k, "td": 1.0, "input_events": inp, "operators": ops}


def test_report_counts_and_window():
    stats = [stat(0, 0, 0), stat(1, 100, 100, 2), stat(2, 50, 50, 4), stat(3, 0, 0), stat(4, 0, 0)]
    metrics = [
        {"operator": "source", "processed": 150},
        {"operator": "parse", "processed": 148, "dead_lettered": 2, "latency_ms": []},
        {"operator": "store", "processed": 148, "latency_ms": [10.0, 30.0]},
    ]
    actions = [
        {"status": "applied", "previous": {"parse": 1}, "targets": {"parse": 3}},
        {"status": "applied", "previous": {"parse": 3}, "targets": {"parse": 1}},
        {"status": "duplicate", "previous": {}, "targets": {"parse": 9}},
    ]
    rep = report.build(TOPO, 160, {"admitted": 150, "shed": 10}, metrics, stats, [], actions)
    assert rep["sent"] == rep["admitted"] + rep["shed"]
    assert rep["lost"] == 0  # 150 admitted = 148 processed + 2 dead-lettered at the entry
    assert rep["scale_out_actions"] == 1 and rep["scale_in_actions"] == 1
    assert rep["latency_ms_mean"] == pytest.approx(20.0)
    assert rep["intervals"] == 2  # idle start and tail trimmed
    assert rep["replicas_mean"] == pytest.approx((2 * 4 + 4 * 4) / 2)


def test_a_warm_up_is_accounted_for_but_not_measured():
    """A warm-up (intervals 1-2, 50 events, 5 ms at the sink, 8 replicas each) then the
    replay from interval 5 (100 events at 40 ms, 2 replicas each): every event counts in
    the accounting, only the replay in latency and resources."""
    stats = [stat(1, 25, 25, 8), stat(2, 25, 25, 8), stat(5, 100, 100, 2)]
    metrics = [
        {"operator": "parse", "interval": 2, "processed": 50},
        {"operator": "store", "interval": 2, "processed": 50, "latency_ms": [5.0]},
        {"operator": "parse", "interval": 5, "processed": 100},
        {"operator": "store", "interval": 6, "processed": 100, "latency_ms": [40.0]},
    ]
    rep = report.build(TOPO, 150, {"admitted": 150}, metrics, stats, [], [], since_interval=5)
    assert rep["lost"] == 0 and rep["processed"] == 150
    assert rep["latency_ms_mean"] == pytest.approx(40.0)
    assert rep["replicas_mean"] == pytest.approx(2 * 4)


def test_a_chained_members_failed_inputs_are_dead_letters_not_the_entrys_fates():
    """`parse` (the entry) processes all 150 events; 4 of its outputs fail in a member
    chained after it. The events are each processed once at the entry (none lost) and 4
    messages are dead-lettered besides: 150 = 150 + 0, dead-lettered 4."""
    metrics = [
        {"operator": "source", "processed": 150},
        {"operator": "parse", "processed": 150, "members_dead_lettered": 4},
        {"operator": "store", "processed": 146},
    ]
    rep = report.build(TOPO, 150, {"admitted": 150}, metrics, [stat(1, 150, 150)], [], [])
    assert rep["lost"] == 0 and rep["processed"] == 150 and rep["dead_lettered"] == 4


def test_a_sink_chains_member_failures_did_not_complete():
    """The sink `store` (counted as a chain would be, without the ledger) processed 150
    events; 2 of them had outputs fail in a member after its head, 4 outputs in all (one
    event fanned out into three, all three failing): 148 completed, 4 dead-lettered."""
    metrics = [
        {"operator": "parse", "processed": 150},
        {"operator": "store", "processed": 150, "members_dead_lettered": 4, "incomplete": 2},
    ]
    rep = report.build(TOPO, 150, {"admitted": 150}, metrics, [stat(1, 150, 150)], [], [])
    assert rep["completed"] == 148 and rep["dead_lettered"] == 4


def test_report_flags_a_loss():
    metrics = [{"operator": "parse", "processed": 90}]
    rep = report.build(TOPO, 100, {"admitted": 100}, metrics, [stat(1, 100, 90)], [], [])
    assert rep["lost"] == 10


def test_exact_means_come_from_sums_where_records_carry_them():
    metrics = [
        # 1,000 events waited 2 s on average; the sample holds only three of them
        {"operator": "parse", "processed": 1000, "queuing_ms": [9000.0, 9000.0, 9000.0]}
        | {"queuing_ms_sum": 2_000_000.0, "queuing_n": 1000},
        {"operator": "parse", "processed": 10, "queuing_ms": [500.0, 1500.0]},  # older record
    ]
    rep = report.build(TOPO, 1010, {"admitted": 1010}, metrics, [stat(1, 1010, 1010)], [], [])
    assert rep["queuing_ms_mean"] == pytest.approx((2_000_000 + 2000) / 1002)


def test_plots_are_written_with_tau(tmp_path):
    stats = [stat(1, 100, 100, 2) | {"queuing_ms_mean": 800.0}, stat(2, 50, 40, 3)]
    files = report.plots(TOPO, stats, tmp_path, tau_ms=1000.0)
    names = {f.name for f in files}
    assert names == {"input_vs_throughput.png", "replicas.png", "shed_ratio.png", "latency.png"}
    assert all(f.stat().st_size > 1000 for f in files)


def test_rescales_per_hour_scale_a_run_to_an_hour():
    from elastic_sps.simulation.run_metrics import per_hour

    # 90 changes in 60 one-second intervals: 90 × 3600 / 60 = 5,400 an hour
    assert per_hour(90, 60, 1.0) == 5_400
    # 20 changes in 96 intervals of 15 min (a day): 20 / 24 h
    assert per_hour(20, 96, 900.0) == pytest.approx(20 / 24)
    assert per_hour(5, 0, 1.0) == 0.0


def test_interval_rows_say_what_was_scaled_what_was_shed_and_why():
    from elastic_sps.services.ensemble.report import interval_rows

    def stats(k: int, inp: float, shed: float, store: int) -> dict:
        ops = {"parse": {"active_replicas": 1, "processed": inp}}
        ops["store"] = {"active_replicas": store, "processed": inp}
        return {"interval": k, "input_events": inp, "shed_events": shed, "operators": ops}

    decisions = [
        {"interval": 2, "operator": "store", "limited_by": ["pool"]},
        {"interval": 2, "operator": "parse", "limited_by": ["scale-down window"]},
    ]
    rows = interval_rows([stats(1, 100, 0, 2), stats(2, 900, 300, 8)], decisions)
    assert rows[0]["scaled"] == {} and rows[0]["short"] == {}
    assert rows[1] == {
        "interval": 2,
        "input_events": 900,
        "shed_events": 300,
        "replicas": 9,
        "scaled": {"store": [2, 8]},
        "short": {"store": ["pool"]},  # the stabiliser is not a reason to shed
    }
