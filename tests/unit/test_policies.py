import pytest

from elastic_sps.control import stela
from elastic_sps.model import topology
from elastic_sps.model.interval_stats import IntervalStats, OperatorStats
from elastic_sps.model.topology import Edge, Operator, Topology
from elastic_sps.policies import PolicyConfigError, make_policy, policy_names
from elastic_sps.policies.autoscale import (
    DECISION_MATRIX,
    Action,
    Activity,
    Autoscale,
    AutoscaleParams,
    activity,
    new_degree,
)
from elastic_sps.policies.ds2 import DS2, DS2Params

pytestmark = pytest.mark.unit


def slide_topology() -> Topology:
    """The congested topology of the Stela slides 6-7 (rates in tuples/s); et_ms = 1000 /
    per-replica rate. Sinks 2, 7, 8, 9, 10 put out 2000 + 1000 + 1000 + 200 + 300 = 4500."""
    rate = {
        "1": 3000,
        "2": 3000,
        "3": 1000,
        "4": 2000,
        "5": 2000,
        "6": 500,
        "7": 5000,
        "8": 5000,
        "9": 5000,
        "10": 5000,
    }
    ops = tuple(Operator(n, 1000.0 / rate[n], 1, 10) for n in rate)
    edges = (
        Edge("source", "1"),
        Edge("1", "3"),
        Edge("1", "4"),
        Edge("1", "6"),
        Edge("4", "2"),
        Edge("3", "5"),
        Edge("5", "7", 0.5),
        Edge("5", "8", 0.5),
        Edge("6", "9", 0.4),
        Edge("6", "10", 0.6),
    )
    return Topology("stela-slides", ops, edges)


ONE = {str(k): 1 for k in range(1, 11)}
SLIDE_REPLICAS = {**ONE, "3": 2}  # operator 3 runs two 1000-tuple/s instances


def test_stela_etp_of_the_slide_example():
    topo = slide_topology()
    fl = stela.flow(topo, 4000.0, SLIDE_REPLICAS)
    assert fl.sink_total(topo) == pytest.approx(4500)
    assert fl.congested == {"1", "3", "4", "6"}
    etp = stela.etp(topo, fl)
    assert etp["3"] == pytest.approx(4 / 9)  # (1000 + 1000) / 4500
    assert etp["4"] == pytest.approx(4 / 9)
    assert etp["6"] == pytest.approx(500 / 4500)  # 0.11
    assert etp["1"] == 0.0


def test_stela_scale_out_slot_order():
    """Slides 9-13: two new slots; the first goes to 3 (ETP 0.44), whose extra output
    congests 5 (3 drops to 0, 5 rises to 0.44); the second goes to 4."""
    topo = slide_topology()
    new, order = stela.scale_out(topo, 4000.0, SLIDE_REPLICAS, 2)
    assert order == ["3", "4"]
    after_first = stela.etp(topo, stela.flow(topo, 4000.0, {**SLIDE_REPLICAS, "3": 3}))
    assert after_first["3"] == 0.0
    assert after_first["5"] == pytest.approx(4 / 9)
    assert new["3"] == 3 and new["4"] == 2


def test_stela_scale_in_takes_from_lowest_etp():
    topo = slide_topology()
    _, taken = stela.scale_in(topo, 4000.0, {**SLIDE_REPLICAS, "7": 3}, 1)
    # Only 3 (ETP 4/9) and 7 (ETP 1000/4500) have replicas above their minimum.
    assert taken == ["7"]


# The slide topology at 4,000 tuples/s with operators 3 and 7 doubled has these ETPs
# (slide 7's rule, worked by hand): 1: 0; 2, 3, 4, 5: 2000/4500 = 4/9; 6: 500/4500 = 1/9;
# 7, 8: 1000/4500 = 2/9; 9: 200/4500 = 2/45; 10: 300/4500 = 1/15.
TWO_SEVENS = {**SLIDE_REPLICAS, "7": 2}
BY_HAND = {
    "A": ["1", "7", "9"],  # 0 + 2/9 + 2/45 = 12/45
    "B": ["3", "3", "6"],  # 4/9 + 4/9 + 1/9 = 1
    "C": ["4", "7", "10"],  # 4/9 + 2/9 + 1/15 = 33/45
    "D": ["2", "5", "8"],  # 4/9 + 4/9 + 2/9 = 10/9
}


def test_stela_machine_etp_sums_are_the_instances_etps():
    sums = stela.etp_sums(slide_topology(), 4000.0, BY_HAND)
    assert sums == pytest.approx({"A": 12 / 45, "B": 1.0, "C": 33 / 45, "D": 10 / 9})


def test_stela_scale_in_removes_the_lowest_etp_sum_machine_and_deals_its_instances():
    """Slides 14-16 with a free slot on each machine (4 slots): A (12/45) goes; its
    instances, in falling ETP order 7, 9, 1, are dealt round-robin to C (33/45), B (1),
    D (10/9): lowest ETPSum first. Nothing is retired."""
    victim, new, retired = stela.remove_machine(slide_topology(), 4000.0, BY_HAND, 4)
    assert victim == "A"
    assert new == {
        "C": ["4", "7", "10", "7"],
        "B": ["3", "3", "6", "9"],
        "D": ["2", "5", "8", "1"],
    }
    assert retired == []


def test_stela_scale_in_on_full_machines_retires_only_what_is_above_minimum():
    """3 slots, every machine full: 7 still has an instance on C, so A's 7 is retired;
    9 and 1 would vanish, so they go over capacity to C then B (round robin)."""
    _, new, retired = stela.remove_machine(slide_topology(), 4000.0, BY_HAND, 3)
    assert retired == ["7"]
    assert new["C"] == ["4", "7", "10", "9"] and new["B"] == ["3", "3", "6", "1"]


def test_stela_on_demand_scale_in_by_machine_from_storms_round_robin_placement():
    """12 instances dealt over 4 machines of 3 slots in topological order: m0 holds 1, 6,
    10 (ETPSum 0 + 1/9 + 1/15 = 8/45, the lowest), so removing 3 slots removes m0."""
    topo = slide_topology()
    placement = stela.round_robin_placement(topo, TWO_SEVENS, 3)
    assert sorted(placement["m0"]) == ["1", "10", "6"]
    counts, removed = stela.scale_in_machines(topo, 4000.0, TWO_SEVENS, 3, 3)
    assert removed == ["m0"]
    assert counts == TWO_SEVENS  # every moved instance kept: each was its operator's last


def test_budget_allocation_respects_the_budget_and_etp():
    topo = slide_topology()
    wanted = {n: 10 for n in topo.names}
    alloc = stela.allocate(topo, 4000.0, wanted, 14)
    assert sum(alloc.values()) == 14
    with pytest.raises(ValueError, match="below the sum of min_replicas"):
        stela.allocate(topo, 4000.0, wanted, 5)


def _one_operator_interval(k: int, received: float, active: int = 2) -> IntervalStats:
    ops = {
        "a": OperatorStats(received, received, 0.0, {"source": received}, active_replicas=active)
    }
    return IntervalStats(k, 1.0, received, ops)


@pytest.mark.parametrize(
    ("r1", "r2", "cell", "want"),
    [
        # one operator, et 10 ms, 2 replicas, window 2 (Δ = 2 s): capacity 2 × 2 s / 10 ms
        # = 400 a window. The line through (0, r1), (1, r2) summed at 2 and 3 (Eq. 2) is
        # 2 r1 + 5 (r2 − r1); LAL = that / 400; Eq. 11 gives the new degree.
        (50, 50, "low, constant: 100/400 = 0.25 → ⌈2 × 0.25⌉", 1),
        (20, 30, "low, increasing: 90/400 = 0.225 → ⌈0.45⌉", 1),
        (100, 100, "medium, constant: 200/400 = 0.5 → nothing", 2),
        (80, 90, "medium, increasing: 210/400 = 0.525 → nothing", 2),
        (170, 170, "high, constant: 340/400 = 0.85 → nothing", 2),
        (150, 160, "high, increasing: 350/400 = 0.875 → +1", 3),
        (300, 300, "critical, constant: 600/400 = 1.5 → ⌈3⌉", 3),
        (250, 300, "critical, increasing: 750/400 = 1.875 → ⌈3.75⌉", 4),
    ],
)
def test_autoscale_table_i_through_analyze(r1, r2, cell, want):
    topo = topology.linear("one", [Operator("a", 10.0, 1, 8)])
    pol = Autoscale(topo, AutoscaleParams(window=2, grace=0))
    pol.analyze(_one_operator_interval(0, r1))
    assert pol.analyze(_one_operator_interval(1, r2)).operators["a"].replicas == want, cell


def test_autoscale_decision_matrix_is_table_i_as_printed():
    """Spot checks of the matrix the analyze() runs above go through."""
    assert DECISION_MATRIX[(Activity.HIGH, False)] is Action.NOTHING
    assert DECISION_MATRIX[(Activity.LOW, True)] is Action.SCALE_IN


@pytest.mark.parametrize(
    ("lal", "want"),
    [
        (0.3, Activity.LOW),
        (0.31, Activity.MEDIUM),
        (0.8, Activity.MEDIUM),
        (0.9, Activity.HIGH),
        (1.0, Activity.HIGH),
        (1.01, Activity.CRITICAL),
    ],
)
def test_autoscale_activity_levels(lal, want):
    assert activity(lal, AutoscaleParams()) is want


def test_eq11_both_cases():
    assert new_degree(3, Activity.HIGH, 0.9, 8) == 4  # high: +1
    assert new_degree(8, Activity.HIGH, 0.9, 8) == 8  # bounded by maxP
    assert new_degree(4, Activity.CRITICAL, 1.6, 8) == 7  # ceil(4 × 1.6) = 7
    assert new_degree(4, Activity.LOW, 0.2, 8) == 1  # ceil(0.8)
    assert new_degree(4, Activity.CRITICAL, 3.0, 8) == 8


def chain_stats(received_a, processed_a, received_b, processed_b, queued_a=0.0, active=1, td=1.0):
    return IntervalStats(
        0,
        td,
        received_a,
        {
            "a": OperatorStats(
                received_a,
                processed_a,
                queued_a,
                {"source": received_a},
                emitted=processed_a,
                active_replicas=active,
                busy_s=processed_a * 0.01,
            ),
            "b": OperatorStats(
                received_b,
                processed_b,
                0.0,
                {"a": received_b},
                active_replicas=active,
                busy_s=processed_b * 0.001,
            ),
        },
    )


def test_autoscale_bfs_propagates_a_critical_parents_output():
    """a is critical (its input far exceeds its capacity); b only sees what a managed to
    emit. Algorithm 1 replaces b's local estimate with combine(local, a's EstimOutput)."""
    topo = topology.linear("ab", [Operator("a", 10.0, 1, 8), Operator("b", 1.0, 1, 8)])
    pol = Autoscale(topo, AutoscaleParams(window=2, grace=0))
    stats = chain_stats(500, 100, 50, 50, queued_a=400)  # half of a's output still in flight
    est = pol.estimates(stats)
    local_b = est["b"].estim_input
    assert activity(est["a"].gal, pol.params) is Activity.CRITICAL
    pol.global_consistency(est, stats)
    expected = min(est["a"].estim_input, est["a"].capacity) * 1.0  # Eqs. 8-9, SF = 1
    assert est["b"].estim_input == pytest.approx(max(local_b, expected))
    assert est["b"].estim_input > local_b


def test_algorithm1_compares_degrees_directly_for_a_child_of_a_critical_parent():
    """a (et 10 ms, 1 replica: 200 a 2 s window) is critical and will emit its capacity,
    200; b (et 20 ms, 4 replicas: 4 × 2 s / 20 ms = 400) received 100 an interval, so its
    estimate is 200 either way and GAL = 0.5: 'medium', where Table I does nothing, but
    Algorithm 1 compares current (4) with next = ⌈4 × 0.5⌉ = 2 and scales in to 2."""
    topo = topology.linear("ab", [Operator("a", 10.0, 1, 8), Operator("b", 20.0, 1, 8)])
    pol = Autoscale(topo, AutoscaleParams(window=2, grace=0))

    def interval(k: int) -> IntervalStats:
        return IntervalStats(
            k,
            1.0,
            500.0,
            {
                "a": OperatorStats(500, 100, 400, {"source": 500}, emitted=100, active_replicas=1),
                "b": OperatorStats(100, 100, 0, {"a": 100}, active_replicas=4),
            },
        )

    pol.analyze(interval(0))
    decision = pol.analyze(interval(1)).operators["b"]
    assert decision.raw_replicas == pytest.approx(0.5)  # GAL
    assert decision.replicas == 2


def test_autoscale_splits_a_parents_output_as_measured():
    """O1 declared 70/30 to O2/O3, but this interval O2 got 20 and O3 80 of what it
    sent: the share along O1 → O3 is 80 / 100 = 0.8, not the declared 0.3."""
    topo = topology.load("diamond")
    pol = Autoscale(topo)
    ops = {
        "O1": OperatorStats(100, 100, 0, {"source": 100}, emitted=100),
        "O2": OperatorStats(20, 20, 0, {"O1": 20}),
        "O3": OperatorStats(80, 80, 0, {"O1": 80}),
        "O4": OperatorStats(88, 88, 0, {"O2": 8, "O3": 80}),
    }
    stats = IntervalStats(0, 1.0, 100.0, ops)
    assert pol._edge_share(stats, "O1", "O3", 0.3) == pytest.approx(0.8)
    quiet = IntervalStats(0, 1.0, 0.0, {n: OperatorStats(0, 0, 0) for n in ops})
    assert pol._edge_share(quiet, "O1", "O3", 0.3) == pytest.approx(0.3)


def test_autoscale_grace_leaves_measurements_out_not_decisions():
    """After a reconfiguration the windows keep their old samples for ``grace``
    intervals, while a decision is still made every interval."""
    topo = topology.linear("one", [Operator("a", 10.0, 1, 8)])
    pol = Autoscale(topo, AutoscaleParams(window=2, grace=2))
    pol.analyze(_one_operator_interval(0, 100, active=2))
    pol.analyze(_one_operator_interval(1, 100, active=2))
    # the count changed to 3: this interval's and the next one's samples stay out
    d = pol.analyze(_one_operator_interval(2, 900, active=3))
    assert list(pol._received["a"]) == [100, 100]
    assert d.operators["a"].replicas >= 1  # decided all the same
    pol.analyze(_one_operator_interval(3, 900, active=3))
    assert list(pol._received["a"]) == [100, 100]
    pol.analyze(_one_operator_interval(4, 900, active=3))
    assert list(pol._received["a"]) == [100, 900]


def test_autoscale_scales_the_critical_operator_out():
    topo = topology.linear("ab", [Operator("a", 10.0, 1, 8), Operator("b", 1.0, 1, 8)])
    pol = Autoscale(topo, AutoscaleParams(window=2, grace=0))
    a = pol.analyze(chain_stats(500, 100, 100, 100, queued_a=400))
    assert a.operators["a"].replicas > 1


def test_ds2_converges_in_one_decision():
    """Source at 1000 events/s; a: 10 ms/event (100/s per replica), emits 0.5 per event;
    b: 1 ms/event (1000/s). Both at one replica, a saturated. Utilisation target 0.7:
    a needs ceil(1000 / 70) = 15 -> pool 16; b needs ceil(500 / 700) = 1."""
    topo = Topology(
        "ab",
        (Operator("a", 10.0, 1, 16), Operator("b", 1.0, 1, 16)),
        (Edge("source", "a"), Edge("a", "b", 0.5)),
    )
    pol = DS2(topo, DS2Params(catch_up_s=1e9))
    stats = IntervalStats(
        0,
        1.0,
        1000.0,
        {
            "a": OperatorStats(1000, 100, 900, {"source": 1000.0}, emitted=50, busy_s=1.0),
            "b": OperatorStats(50, 50, 0, {"a": 50.0}, busy_s=0.05),
        },
    )
    assert pol.analyze(stats).replicas() == {"a": 15, "b": 1}


@pytest.mark.parametrize(
    ("build", "needle"),
    [
        (lambda t: AutoscaleParams(theta_min=0.8, theta_max=0.3), "theta_min < theta_max"),
        (lambda t: AutoscaleParams(window=1), "at least 2 samples"),
        (lambda t: make_policy("stela", t, budget=-1), "budget"),
        (lambda t: DS2Params(target_utilization=0), "target_utilization"),
        (lambda t: make_policy("lag:0", t), "lag_threshold"),
        (lambda t: make_policy("static:0", t), "replicas"),
        (lambda t: make_policy("oracle", t), "unknown policy"),
    ],
)
def test_bad_parameters_are_refused(build, needle):
    with pytest.raises(PolicyConfigError, match=needle):
        build(topology.load("twitter"))


def test_every_policy_runs_in_the_simulator():
    from elastic_sps.model import traces
    from elastic_sps.simulation.simulator import simulate

    topo = topology.load("twitter")
    arrivals = traces.load("short-spikes").per_interval(1.0)
    for name in policy_names():
        spec = {"static": "static:2"}.get(name, name)
        m = simulate(topo, arrivals, make_policy(spec, topo), 1.0).metrics
        assert m.processed_ratio > 0.5, name


def _one_op_stats(received, processed, busy_s):
    return IntervalStats(
        0,
        1.0,
        received,
        {"a": OperatorStats(received, processed, 0.0, {"source": received}, busy_s=busy_s)},
    )


def test_pa_sps_sizes_with_the_measured_cost_when_the_benchmark_is_optimistic():
    """Declared et 2 ms; the dataplane measured 0.9 s busy for 300 events = 3 ms. The
    Basic predictor repeats λ_G = 1,000 events/s: Eq. 2 gives 1000 × 0.003 / 1 = 3
    replicas, not the declared cost's 2."""
    topo = topology.linear("a", [Operator("a", 2.0, 1, 8)])
    pol = make_policy("pa-sps", topo, predictor="basic")
    a = pol.analyze(_one_op_stats(1000, 300, 0.9))
    assert a.operators["a"].raw_replicas == pytest.approx(3.0)
    assert a.operators["a"].replicas == 3


def test_pa_sps_keeps_the_benchmark_when_the_measurement_is_cheaper():
    """Measured 0.1 s for 200 events = 0.5 ms < 2 ms declared: max() keeps 2 ms, so
    1,000 events/s need 1000 × 0.002 = 2 replicas; an interval of 5 events is ignored."""
    topo = topology.linear("a", [Operator("a", 2.0, 1, 8)])
    pol = make_policy("pa-sps", topo, predictor="basic")
    assert pol.analyze(_one_op_stats(1000, 200, 0.1)).operators["a"].replicas == 2
    assert pol.analyze(_one_op_stats(1000, 5, 5.0)).operators["a"].replicas == 2


def test_ds2_holds_a_scale_down_for_its_seconds_at_any_td():
    """a: 10 ms/event, 100/s per replica at utilisation 1. At td 5 s: interval 0 sees
    1000 events/s (needs 10), then 100/s (needs 1) with 10 active: the largest
    recommendation of the last 60 s (12 intervals) holds 10 until interval 12 leaves
    interval 0 out of the window; max_scale_down 1 lets it go straight to 1."""
    topo = topology.linear("a", [Operator("a", 10.0, 1, 16)])
    pol = DS2(topo, DS2Params(target_utilization=1.0, catch_up_s=1e9, max_scale_down=1.0))

    def interval(k: int, rate: float) -> IntervalStats:
        n = rate * 5.0
        ops = {"a": OperatorStats(n, n, 0, {"source": n}, busy_s=n * 0.01, active_replicas=10)}
        return IntervalStats(k, 5.0, n, ops)

    assert pol.analyze(interval(0, 1000)).replicas() == {"a": 10}
    held = [pol.analyze(interval(k, 100)).replicas()["a"] for k in range(1, 14)]
    assert held == [10] * 11 + [1, 1]
