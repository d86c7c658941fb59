import pytest

from elastic_sps.model import pa_sps_model as model
from elastic_sps.model import topology
from elastic_sps.model.interval_stats import IntervalStats, OperatorStats
from elastic_sps.model.topology import Edge, Operator, Topology
from elastic_sps.policies import make_policy

pytestmark = pytest.mark.unit


def steady_stats(topo, input_events, queued=None, td=1.0, active=None):
    """Stats of an interval where every operator processed all it received."""
    queued = queued or {}
    processed = {"source": input_events}
    ops = {}
    for name in topo.order:
        rfrom = {e.src: processed[e.src] * e.fraction for e in topo.predecessors[name]}
        recv = sum(rfrom.values())
        processed[name] = recv
        ops[name] = OperatorStats(
            received=recv,
            processed=recv,
            queued=queued.get(name, 0.0),
            received_from=rfrom,
            active_replicas=(active or {}).get(name, 2),
        )
    return IntervalStats(0, td, input_events, ops)


def test_fig4_three_operators_same_load_different_et():
    """Fig. 4: td = 1000 ms, three independent operators predicted to receive the same
    load, all with 2 replicas during t; Eq. 2 gives 2, 1 and 4 replicas for t+1.
    (The figure's numbers are an image; 1000 events with et = 2, 1, 4 ms reproduce it.)"""
    ops = (Operator("O1", 2.0), Operator("O2", 1.0), Operator("O3", 4.0))
    topo = Topology("fig4", ops, tuple(Edge("source", o.name) for o in ops))
    policy = make_policy("pa-sps:basic", topo)
    analysis = policy.analyze(steady_stats(topo, 1000.0, td=1.0))
    assert analysis.replicas() == {"O1": 2, "O2": 1, "O3": 4}


def test_fig6_predicted_received_and_theta4():
    topo = topology.load("diamond")
    stats = steady_stats(topo, 100.0)
    theta = model.operator_thetas(topo, model.edge_thetas(topo, stats))
    assert theta["O4"] == pytest.approx(0.58)
    rec = model.predicted_received(100.0, theta)
    assert [round(rec[n], 6) for n in ("O1", "O2", "O3", "O4")] == [100, 70, 30, 58]


def test_eq6_uses_measured_not_declared_fractions():
    topo = topology.load("diamond")
    st = steady_stats(topo, 100.0)
    o2 = st.operators["O2"]
    # O1 actually sent half of its output to O2 this interval.
    ops = dict(st.operators)
    ops["O2"] = OperatorStats(50, 50, 0, {"O1": 50.0})
    theta = model.edge_thetas(topo, IntervalStats(0, 1.0, 100.0, ops))
    assert theta[("O1", "O2")] == pytest.approx(0.5)
    assert o2.received == pytest.approx(70)


def test_eq6_falls_back_to_declared_fraction_when_predecessor_idle():
    topo = topology.load("diamond")
    st = steady_stats(topo, 0.0)
    theta = model.edge_thetas(topo, st)
    assert theta[("O1", "O2")] == pytest.approx(0.7)


def test_eq7_propagates_queues_downstream_presps_does_not():
    topo = topology.linear("chain", [Operator("a", 1.0), Operator("b", 1.0)])
    st = steady_stats(topo, 100.0, queued={"a": 40.0, "b": 10.0})
    theta = model.operator_thetas(topo, model.edge_thetas(topo, st))
    assert model.predicted_queue(topo, st, theta) == {"a": 40.0, "b": 50.0}
    assert model.predicted_queue(topo, st, theta, propagate=False) == {"a": 40.0, "b": 10.0}


def test_pa_sps_adds_queue_to_received_and_rounds_up():
    topo = topology.linear("chain", [Operator("a", 10.0, 1, 8)])
    st = steady_stats(topo, 150.0, queued={"a": 60.0})
    a = make_policy("pa-sps:basic", topo).analyze(st)
    # (150 received + 60 queued) × 10 ms / 1 s = 2.1 -> 3 replicas
    assert a.operators["a"].predicted_load == pytest.approx(210.0)
    assert a.operators["a"].raw_replicas == pytest.approx(2.1)
    assert a.operators["a"].replicas == 3


@pytest.mark.parametrize(
    ("raw", "lo", "hi", "want"),
    [(2.0000000001, 1, 8, 2), (0.0, 1, 8, 1), (50, 1, 8, 8), (0.2, 0, 8, 1), (0, 0, 8, 0)],
)
def test_rounding_within_pool(raw, lo, hi, want):
    assert model.round_replicas(raw, lo, hi) == want


def test_eq7_on_fig6_printed_and_textual_readings_differ():
    """100 events queued at O1, none elsewhere. As printed (weight θ_p): O2 and O3 each
    inherit 100 × θ_1 = 100, and O4 100 × 0.7 + 100 × 0.3 = 100. Read with θ_i^p (the
    share of p's output sent to i): O2 100 × 0.7 = 70, O3 100 × 0.3 = 30, and O4
    70 × 0.4 + 30 × 1 = 58 — what O1's queue will really bring to each operator."""
    topo = topology.load("diamond")
    st = steady_stats(topo, 100.0, queued={"O1": 100.0})
    edge = model.edge_thetas(topo, st)
    theta = model.operator_thetas(topo, edge)
    printed = model.predicted_queue(topo, st, theta)
    textual = model.predicted_queue(topo, st, theta, edge_theta=edge)
    names = ("O1", "O2", "O3", "O4")
    assert [round(printed[n], 6) for n in names] == [100, 100, 100, 100]
    assert [round(textual[n], 6) for n in names] == [100, 70, 30, 58]


def test_pa_sps_sizes_o4_from_the_textual_reading_when_asked():
    """O4 (et 3 ms, td 1 s) predicted 58 received + 58 (textual) or 100 (printed) queued:
    116 × 3 ms = 0.348 → 1 replica either way at this load; × 10 the input and the queue
    it is 1,160 × 3 ms = 3.48 → 4 against 1,580 × 3 ms = 4.74 → 5."""
    from elastic_sps.control.predictors import make_predictor
    from elastic_sps.policies.pa_sps import PASPS

    topo = topology.load("diamond")
    st = steady_stats(topo, 1000.0, queued={"O1": 1000.0})
    printed = PASPS(topo, make_predictor("basic")).analyze(st).operators["O4"]
    textual = PASPS(topo, make_predictor("basic"), eq7_weight="theta_ip").analyze(st)
    assert printed.replicas == 5 and textual.operators["O4"].replicas == 4


def test_eq6_counts_what_the_predecessor_sent_in_the_same_batches_when_it_can():
    """Micro-batches: in interval t parse processed 100 events and sent 70 to
    classify_content, which read none of them yet (its batch comes next interval). With
    the receiver's count θ would be 0 / 100 = 0 in t (and 70 over whatever parse
    processes in t+1, next); counted at the sender it is 70 / 100 = 0.7 in t. The entry
    edge: 100 arrived, 20 were shed, so θ_parse = 1.0 × 80 / 100 = 0.8."""
    from elastic_sps.model.interval_stats import IntervalStats, OperatorStats

    topo = topology.load("twitter")
    ops = {n: OperatorStats(received=0.0, processed=0.0, queued=0.0) for n in topo.names}
    ops["classify_content"] = OperatorStats(
        received=0.0, processed=0.0, queued=0.0, received_from={"parse": 0.0}
    )
    ops["parse"] = OperatorStats(
        received=80.0,
        processed=100.0,
        queued=0.0,
        received_from={"source": 80.0},
        emitted_to={"classify_content": 70.0},
    )
    stats = IntervalStats(0, 1.0, 100.0, ops, shed_events=20.0)
    theta = model.edge_thetas(topo, stats)
    assert theta[("parse", "classify_content")] == pytest.approx(0.7)
    assert theta[("source", "parse")] == pytest.approx(0.8)
    # without sender-side counts, Eq. 6 as printed: the receiver's 0 of parse's 100
    ops["parse"] = OperatorStats(received=80.0, processed=100.0, queued=0.0)
    old = model.edge_thetas(topo, IntervalStats(0, 1.0, 100.0, ops, shed_events=20.0))
    assert old[("parse", "classify_content")] == 0.0
