import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from elastic_sps.las import shed_sim
from elastic_sps.las.operator_side import LasOperator, OperatorState, relative_error
from elastic_sps.las.shedder import (
    AverageQueuingLatency,
    LasShedder,
    ShedderState,
    StrawManShedder,
)
from elastic_sps.las.sketch import Hashes, SketchPair, dimensions

pytestmark = pytest.mark.unit

# shed_sim's own functions, before ``memoised`` stands in for them
_make_stream, _run = shed_sim.make_stream, shed_sim.run
_streams: dict[tuple[shed_sim.Setup, int], shed_sim.Stream] = {}
_stream_key: dict[int, tuple[shed_sim.Setup, int]] = {}  # id(stream), kept alive in _streams
_runs: dict[tuple[Any, ...], shed_sim.Outcome] = {}


def _memo_stream(setup: shed_sim.Setup, seed: int) -> shed_sim.Stream:
    if (setup, seed) not in _streams:
        stream = _streams[setup, seed] = _make_stream(setup, seed)
        _stream_key[id(stream)] = (setup, seed)
    return _streams[setup, seed]


def _memo_run(
    kind: str, setup: shed_sim.Setup, stream: shed_sim.Stream, seed: int, chunk: int | None = None
) -> shed_sim.Outcome:
    made = _stream_key.get(id(stream))
    if made is None:  # a stream made elsewhere: not remembered
        return _run(kind, setup, stream, seed, chunk)
    key = (kind, setup, made, seed, chunk)
    if key not in _runs:
        _runs[key] = _run(kind, setup, stream, seed, chunk)
    return _runs[key]


@pytest.fixture(scope="module", autouse=True)
def _forget() -> Iterator[None]:
    yield
    for memo in (_streams, _stream_key, _runs):  # tens of MB of arrays
        memo.clear()


@contextlib.contextmanager
def memoised() -> Iterator[None]:
    """shed_sim's streams and runs remembered by their inputs (both are seeded: the same
    inputs, the same result), for the tests that repeat them: every ``summarise`` re-runs
    Base Line per stream, and Fig. 5b's Zipf-1.0 oracle point repeats ``default_runs``'
    first seeds. Not for the test that checks a seed repeats its result."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(shed_sim, "make_stream", _memo_stream)
        mp.setattr(shed_sim, "run", _memo_run)
        yield


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


def test_bootstrap_probes_every_kth_admitted_tuple_until_the_first_sketch():
    """Charging a benchmark of 1 ms before any sketch, with a probe every 3rd admitted
    tuple: Ĉ rides on the 3rd and 6th (Ĉ = 3 and 6 ms); the operator's Δ re-anchors Ĉ;
    after the first sketch only Listing 3.2's one probe per sketch remains."""
    s = LasShedder(
        AverageQueuingLatency(10.0), epsilon=0.0, bootstrap_mean=0.001, bootstrap_probe_every=3
    )
    carried: list[tuple[int, float]] = []
    s.on_piggyback = lambda k, c: carried.append((k, c))
    s.shed_batch(np.zeros(7, dtype=np.int64), np.zeros(7))
    assert carried == [(2, pytest.approx(0.003)), (5, pytest.approx(0.006))]
    s.apply_delta(0.004)  # the 3rd tuple really completed at 7 ms
    assert s.C_hat == pytest.approx(0.011)
    pair = SketchPair.empty(Hashes.draw(2, 64, seed=0))
    pair.update(np.array([0]), np.array([0.002]))
    s.receive_sketch(pair)
    carried.clear()
    s.shed_batch(np.zeros(7, dtype=np.int64), np.zeros(7))
    assert carried == [(0, pytest.approx(0.013))]


def test_keep_probing_sends_one_probe_at_a_time():
    """After the first sketch, with keep_probing: Ĉ rides on the first admitted tuple
    (charged 2 ms each: Ĉ = 2 ms), then on none of the next three until its Δ is applied;
    the next batch then probes its first tuple again (4 × 2 ms + Δ 1 ms + 2 ms = 11 ms)."""
    s = LasShedder(AverageQueuingLatency(10.0), epsilon=0.0, keep_probing=True)
    pair = SketchPair.empty(Hashes.draw(2, 64, seed=0))
    pair.update(np.array([0]), np.array([0.002]))
    s.receive_sketch(pair)
    carried: list[tuple[int, float]] = []
    s.on_piggyback = lambda k, c: carried.append((k, c))
    s.shed_batch(np.zeros(2, dtype=np.int64), np.zeros(2))
    s.shed_batch(np.zeros(2, dtype=np.int64), np.zeros(2))
    assert carried == [(0, pytest.approx(0.002))]  # the Δ is still awaited
    s.apply_delta(0.001)
    s.shed_batch(np.zeros(2, dtype=np.int64), np.zeros(2))
    assert carried[1] == (0, pytest.approx(0.011))


def test_without_probes_a_stable_sketch_lets_the_queue_drift_past_tau():
    """The §5.1 setup on a uniform stream (every tuple's sketch estimate near the mean):
    Listing 3.2's protocol (no Δ once the sketch is stable) lets the real mean queuing
    latency exceed τ by over half; re-anchoring Ĉ keeps it within 1.25 τ."""
    paper = shed_sim.Setup(distribution="uniform", keep_probing=False)
    probing = shed_sim.Setup(distribution="uniform")
    tau = paper.tau_ms
    drift = shed_sim.summarise_runs("las", paper, runs=3, seed=0)["avg_queuing_latency_ms"]
    held = shed_sim.summarise_runs("las", probing, runs=3, seed=0)["avg_queuing_latency_ms"]
    assert drift > 1.5 * tau
    assert held <= 1.25 * tau


def test_shedding_ratio_is_relative_to_base_line():
    """§5.1: λ = (d^alg − d^BaseLine) / d^BaseLine: 120 drops against 100 is +0.2, 90 is
    −0.1; undefined when Base Line drops nothing."""
    assert shed_sim.shedding_ratio(120, 100) == pytest.approx(0.2)
    assert shed_sim.shedding_ratio(90, 100) == pytest.approx(-0.1)
    assert shed_sim.shedding_ratio(5, 0) is None


def test_sweeps_cover_the_papers_axes():
    """Fig. 4: under-provisioning from 90 % to −10 % (nothing to shed at −10 %); Fig. 5:
    uniform to Zipf-3.0, each point with every shedder and λ."""
    small = shed_sim.Setup(tuples=3000, window=256)
    fig4 = shed_sim.sweep("underprovision", small, runs=1, seed=0)
    assert [p["underprovision"] for p in fig4] == [0.9, 0.75, 0.5, 0.25, 0.0, -0.1]
    over = {d["shedder"]: d for d in fig4[-1]["shedders"]}
    assert all(over[k]["dropped_ratio"] == 0.0 for k in shed_sim.SHEDDERS)
    assert over["las"]["shedding_ratio"] is None
    fig5 = shed_sim.sweep("distribution", small, runs=1, seed=0)
    assert fig5[0]["distribution"] == "uniform"
    assert fig5[-1]["distribution"] == "zipf-3.0"
    base = {d["shedder"]: d for d in fig5[0]["shedders"]}["baseline"]
    assert base["shedding_ratio"] == 0.0


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
    """Three streams (LAS takes seconds a run): of seeds 0-7, seed 0's stream exceeds its
    declared cost the most (LAS without its start-up probes queued 5.5 τ on it), and
    over seeds 0-15 no three of LAS's runs average more than 1.08 τ."""
    with memoised():
        rows = shed_sim.summarise(shed_sim.SHEDDERS, shed_sim.Setup(), runs=3, seed=0)
        runs = {row["shedder"]: row for row in rows}
        oracle = shed_sim.Setup(bootstrap="oracle")
        runs["las-oracle"] = shed_sim.summarise_runs("las", oracle, runs=3, seed=0)
    return runs


def test_las_holds_tau_where_strawman_and_baseline_do_not(default_runs):
    """§5.1 (τ = 6.4 ms): Straw-Man and Baseline queue over 3 τ. LAS starting from the
    operator's declared cost holds 1.25 τ once its Δ probes re-anchor Ĉ before the first
    sketch (without them it measured 2.6 τ on these streams, 2.1 τ on seeds 0-7: the
    seeds whose Zipf stream costs more than the benchmark built, unseen, a backlog that
    weighed on the whole run), as it does with the stream's true mean as its start-up
    charge (an oracle)."""
    tau = 6.4
    assert default_runs["las"]["avg_queuing_latency_ms"] <= 1.25 * tau
    assert default_runs["las-oracle"]["avg_queuing_latency_ms"] <= 1.25 * tau
    assert default_runs["full"]["avg_queuing_latency_ms"] <= tau * 1.001
    for other in ("strawman", "baseline"):
        assert default_runs[other]["avg_queuing_latency_ms"] > 3 * tau
        assert (
            default_runs[other]["avg_queuing_latency_ms"]
            > 5 * default_runs["las"]["avg_queuing_latency_ms"]
        )


def test_las_drops_little_more_than_full_knowledge(default_runs):
    assert default_runs["las"]["dropped_ratio"] <= 1.25 * default_runs["full"]["dropped_ratio"]


def test_at_zero_under_provisioning_las_drops_near_what_full_knowledge_drops():
    """Fig. 4's 0 % point (ρ = 1): Full Knowledge drops 3.79 % of 3 streams' tuples to
    hold τ; LAS, with the operator's Δ replies delivered when they are due, 3.90 %
    (≤ 1.25 ×) at a mean queuing latency within 1.25 τ. Delivered every 32 tuples
    instead, Ĉ kept its (1 + ε) over-charge for about 100 ms at a time and LAS dropped
    5.61 %, 1.48 × Full Knowledge."""
    setup = shed_sim.Setup(underprovision=0.0)
    with memoised():  # one Base Line run per stream for both
        las = shed_sim.summarise_runs("las", setup, runs=3, seed=0)
        full = shed_sim.summarise_runs("full", setup, runs=3, seed=0)
    # at ρ = 1 the queue grows without drops; holding τ takes a few per cent, not none and
    # not a tenth (a guard against a degenerate comparison, not the simulator's own figure)
    assert 0.01 < full["dropped_ratio"] < 0.10
    assert las["dropped_ratio"] <= 1.25 * full["dropped_ratio"]
    assert las["avg_queuing_latency_ms"] <= 1.25 * setup.tau_ms
    streams = [shed_sim.make_stream(setup, k) for k in range(3)]
    batched = np.mean(
        [shed_sim.run("las", setup, s, k, chunk=32).dropped.mean() for k, s in enumerate(streams)]
    )
    assert batched > 1.4 * full["dropped_ratio"]


def test_the_shedding_ratio_falls_with_skew_as_in_fig_5b():
    """Fig. 5b: λ decreases as the Zipf exponent grows (the sketch is at its best on skewed
    streams). Started from the stream's own mean cost, LAS's λ on 3 streams falls from
    +0.057 (uniform) to +0.036 (Zipf-1.0) and +0.009 (Zipf-3.0). With the declared start-up
    charge (the items' unweighted mean) 10 streams rise again at Zipf-2.5-3.0, where one
    or two items carry the stream and its mean lies anywhere in 0.1-6.4 ms
    (docs/measurements.md, "LAS")."""
    with memoised():  # Zipf-1.0 (the default) with the oracle: default_runs' first seeds
        ratios = [
            shed_sim.summarise(
                ("las",), shed_sim.Setup(distribution=d, bootstrap="oracle"), runs=3, seed=0
            )[0]["shedding_ratio"]
            for d in ("uniform", "zipf-1.0", "zipf-3.0")
        ]
    assert ratios[0] > ratios[1] > ratios[2] > 0
    assert ratios[2] < 0.02


def test_same_seed_same_result():
    setup = shed_sim.Setup(tuples=8000)
    a = shed_sim.run("las", setup, shed_sim.make_stream(setup, 3), 3).summary()
    b = shed_sim.run("las", setup, shed_sim.make_stream(setup, 3), 3).summary()
    assert a == b


def test_message_count_is_order_m_over_n():
    """Theorem 3.3: O(m/N) messages from the operator (sketches and Δ replies)."""
    setup = shed_sim.Setup(underprovision=0.0, bootstrap_probe_every=0, keep_probing=False)
    for window in (256, 1024):
        s = shed_sim.Setup(**{**setup.__dict__, "window": window})
        o = shed_sim.run("las", s, shed_sim.make_stream(s, 1), 1)
        processed = int((~o.dropped).sum())
        assert 0 < o.sketches + o.deltas <= 2 * processed / window


def test_phase_d_changes_what_the_most_frequent_item_costs():
    """Fig. 6 phase D: item 0 (the most frequent under Zipf) takes w_max's cost. With
    p_0 = 1 / H_4096 ≈ 0.112 of the tuples, W̄ rises by about p_0 × (w_max − w_0): it must
    move between phases C and D (swapping keys and costs together left it at 3.58 ms)."""
    from elastic_sps.las.shed_sim import Setup, make_phase_stream

    per = 20_000
    stream = make_phase_stream(Setup(), seed=0, per_phase=per)
    w0 = stream.duration_of_item[0]
    c = stream.durations[2 * per : 3 * per].mean()
    d = stream.durations[3 * per : 4 * per].mean()
    assert w0 < 0.0064
    assert d - c == pytest.approx(0.112 * (0.0064 - w0), rel=0.25)


def test_las_starts_from_the_declared_cost_not_the_streams_true_mean():
    """Before the first sketch LAS charges what a real system knows: the operator's
    benchmark, (0.1 + 6.4) / 2 = 3.25 ms for §5.1's costs, not the Zipf stream's W̄."""
    from elastic_sps.las.shed_sim import Setup, build_shedder, make_stream

    setup = Setup()
    stream = make_stream(setup, seed=0)
    las = build_shedder("las", setup, stream, seed=0)
    assert las.bootstrap_mean == pytest.approx(0.00325)
    assert abs(stream.mean_duration - 0.00325) > 1e-4
    assert build_shedder("las", Setup(bootstrap="nop"), stream, 0).bootstrap_mean is None
