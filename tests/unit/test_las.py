import numpy as np
import pytest

from shared.las import shed_sim
from shared.las.operator_side import LasOperator, OperatorState, relative_error
from shared.las.shedder import (
    AverageQueuingLatency,
    LasShedder,
    ShedderState,
    StrawManShedder,
)
from shared.las.sketch import Hashes, SketchPair, dimensions

pytestmark = pytest.mark.unit


def test_dimensions_match_the_paper():
    assert dimensions(0.25, 0.70) == (2, 4)  # Figure 1
    assert dimensions(0.1, 0.05) == (4, 54)  # §5.1


def test_sketch_estimates_exactly_without_collisions():
    pair = SketchPair.empty(Hashes.draw(4, 4096, seed=1))
    keys = np.array([3, 3, 7, 7, 7])
    pair.update(keys, np.array([1.0, 3.0, 5.0, 5.0, 5.0]))
    assert pair.estimate(np.array([3, 7])) == pytest.approx([2.0, 5.0])


def test_sketch_overestimates_under_collisions_only_by_mixing():
    pair = SketchPair.empty(Hashes.draw(1, 1, seed=1))  # everything collides
    pair.update(np.array([1, 2]), np.array([1.0, 3.0]))
    assert pair.estimate(np.array([1])) == pytest.approx([2.0])


class Recorder:
    def __init__(self):
        self.sketches, self.deltas = [], []


def operator(window=4, tolerance=0.05):
    rec = Recorder()
    op = LasOperator(
        rec.sketches.append,
        rec.deltas.append,
        delta=0.25,
        epsilon=0.7,
        window=window,
        tolerance=tolerance,
        seed=0,
    )
    return op, rec


def test_operator_start_to_stabilizing_after_n_tuples():
    op, rec = operator(window=4)
    for _ in range(3):
        op.update(1, 1.0)
    assert op.state is OperatorState.START
    op.update(1, 1.0)
    assert op.state is OperatorState.STABILIZING  # Figure 2.A
    assert rec.sketches == []


def test_operator_publishes_when_stable_and_resets():
    op, rec = operator(window=4)
    for _ in range(7):  # same durations: the check at m = 8 finds η = 0
        op.update(1, 1.0)
    assert rec.sketches == []
    op.update(1, 1.0)
    assert op.state is OperatorState.START  # Figure 2.C
    assert len(rec.sketches) == 1
    assert rec.sketches[0].F[0].sum() == 7  # tuples 1-7; the 8th lands after the reset
    assert op.pair.F[0].sum() == 1


def test_operator_stays_stabilizing_while_durations_move():
    op, rec = operator(window=4)
    for _ in range(4):
        op.update(1, 1.0)
    for _ in range(5):
        op.update(1, 50.0)  # W/F drifts far from S
    assert op.state is OperatorState.STABILIZING  # Figure 2.B
    assert rec.sketches == []
    assert op.S.max() > 1.0  # S was refreshed


def test_relative_error_eq1():
    pair = SketchPair.empty(Hashes.draw(1, 2, seed=0))
    pair.F[:] = [[1, 1]]
    pair.W[:] = [[2, 4]]
    S = np.array([[2.0, 2.0]])
    assert relative_error(S, pair) == pytest.approx(2 / 4)


def test_operator_replies_delta_to_piggybacked_c_hat():
    op, rec = operator()
    op.update(1, 2.0)
    op.update(1, 3.0, c_hat=4.0)
    assert rec.deltas == [pytest.approx(1.0)]  # C = 5, Ĉ = 4


def test_shedder_nop_send_run():
    goal = AverageQueuingLatency(0.010)
    s = LasShedder(goal, epsilon=0.0)
    assert s.state is ShedderState.NOP
    assert not s.shed(1, 0.0)  # NOP admits
    pair = SketchPair.empty(Hashes.draw(2, 64, seed=0))
    pair.update(np.array([1]), np.array([0.004]))
    carried = []
    s.on_piggyback = lambda k, c: carried.append(c)
    s.receive_sketch(pair)
    assert s.state is ShedderState.SEND  # Figure 3.A
    assert not s.shed(1, 0.0)
    assert s.state is ShedderState.RUN  # Figure 3.B, Ĉ piggy-backed
    assert carried == [pytest.approx(0.004)]
    s.apply_delta(0.5)  # Figure 3.C
    assert s.C_hat == pytest.approx(0.504)
    s.receive_sketch(pair)
    assert s.state is ShedderState.SEND  # Figure 3.D


def test_check_drops_when_the_average_would_exceed_tau():
    goal = AverageQueuingLatency(0.010)
    s = StrawManShedder(goal, mean_duration=0.008)
    # All arrive at t=0: queuing latencies 0, 8, 16, 24 ms ...; averages 0, 4, 8, 12 ms
    drops = s.shed_batch(np.zeros(4, dtype=np.int64), np.zeros(4))
    assert drops.tolist() == [False, False, False, True]


def test_more_active_replicas_means_later_shedding():
    keys = np.zeros(200, dtype=np.int64)
    now = np.arange(200) * 0.001  # 1000 tuples/s, 2 ms each: one replica is 2x short
    one = StrawManShedder(AverageQueuingLatency(0.005), 0.002, replicas=1).shed_batch(keys, now)
    two = StrawManShedder(AverageQueuingLatency(0.005), 0.002, replicas=2).shed_batch(keys, now)
    assert one.sum() > 50
    assert two.sum() == 0


@pytest.fixture(scope="module")
def default_runs():
    setup = shed_sim.Setup()
    return {k: shed_sim.summarise_runs(k, setup, runs=8, seed=0) for k in shed_sim.SHEDDERS}


def test_las_holds_tau_where_strawman_and_baseline_do_not(default_runs):
    tau = 6.4
    assert default_runs["las"]["avg_queuing_latency_ms"] <= 1.25 * tau
    assert default_runs["full"]["avg_queuing_latency_ms"] <= tau * 1.001
    assert default_runs["strawman"]["avg_queuing_latency_ms"] > 3 * tau
    assert default_runs["baseline"]["avg_queuing_latency_ms"] > 3 * tau


def test_las_drops_little_more_than_full_knowledge(default_runs):
    assert default_runs["las"]["dropped_ratio"] <= 1.25 * default_runs["full"]["dropped_ratio"]


def test_same_seed_same_result():
    setup = shed_sim.Setup(tuples=8000)
    a = shed_sim.run("las", setup, shed_sim.make_stream(setup, 3), 3).summary()
    b = shed_sim.run("las", setup, shed_sim.make_stream(setup, 3), 3).summary()
    assert a == b


def test_message_count_is_order_m_over_n():
    """Theorem 3.3: O(m/N) messages from the operator (sketches and Δ replies)."""
    setup = shed_sim.Setup(underprovision=0.0)
    for window in (256, 1024):
        s = shed_sim.Setup(**{**setup.__dict__, "window": window})
        o = shed_sim.run("las", s, shed_sim.make_stream(s, 1), 1)
        processed = int((~o.dropped).sum())
        assert 0 < o.sketches + o.deltas <= 2 * processed / window
