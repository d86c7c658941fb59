"""The wall-clock calibration of LAS against a simulated micro-batch operator.

The operator starts a batch every ``trigger`` seconds (if idle) after a fixed planning
``overhead`` and takes everything queued; each event then costs ``cost`` seconds of wall
clock — ``underestimate`` times what the shedder's cost model says. Probes are answered
when the probed event completes, as the dataplane does.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
import pytest

from elastic_sps.las.shedder import (
    AverageQueuingLatency,
    HorizonAverageQueuingLatency,
    StrawManShedder,
)
from elastic_sps.las.wallclock import CalibratedShedder, WallClockCalibration

pytestmark = pytest.mark.unit


@dataclass
class Outcome:
    mean_wait: float
    shed_ratio: float
    calibration: WallClockCalibration
    waits: np.ndarray  # (arrival, wait) per admitted event


def run(
    tau: float,
    rate: float,
    base_rate: float | None = None,
    spike: tuple[float, float] = (0.0, float("inf")),
    cost: float = 0.001,
    underestimate: float = 3.0,
    trigger: float = 0.5,
    overhead: float = 0.3,
    duration: float = 60.0,
    calibrate: bool = True,
    calibration: WallClockCalibration | None = None,
) -> Outcome:
    goal = HorizonAverageQueuingLatency(tau, horizon_s=30.0)  # as the ingress uses
    shedder = StrawManShedder(goal, mean_duration=cost / underestimate)
    las = CalibratedShedder(shedder, calibration)
    las.sync()
    queue: deque[tuple[float, str | None, float]] = deque()
    answers: list[tuple[float, str, float]] = []
    waits: list[tuple[float, float]] = []
    step, t, next_batch, busy_until, next_poll = 0.01, 0.0, 0.0, 0.0, 0.0
    sent = shed = 0
    while t < duration:
        if t >= next_poll and calibrate:  # the ingress polls Redis ten times a second
            next_poll = t + 0.1
            for _, tag, delta in [a for a in answers if a[0] <= t]:
                las.answer(tag, delta)
            answers = [a for a in answers if a[0] > t]
        in_spike = spike[0] <= t < spike[1]
        n = int((rate if in_spike or base_rate is None else base_rate) * step)
        tags = [f"{t:.2f}/{k}" for k in range(n)]
        if calibrate:
            drop, probes = las.decide(np.zeros(n, dtype=np.int64), t, tags)
        else:
            drop, probes = shedder.shed_batch(np.zeros(n, dtype=np.int64), np.full(n, t)), {}
        sent += n
        shed += int(drop.sum())
        for k in np.flatnonzero(~drop):
            tag = tags[k] if k in probes else None
            queue.append((t, tag, t + probes.get(k, 0.0)))
        if queue and t >= next_batch and t >= busy_until:
            start = t + overhead
            for i, (arrived, tag, predicted) in enumerate(queue):
                began = start + i * cost
                waits.append((arrived, began - arrived))
                if tag is not None:
                    answers.append((began + cost, tag, began + cost - predicted))
            busy_until = start + len(queue) * cost
            next_batch = t + trigger
            queue.clear()
        t += step
    trace = np.array(waits)
    return Outcome(float(trace[:, 1].mean()), shed / sent, las.calibration, trace)


def test_floor_is_learned_from_probes_sent_with_no_backlog() -> None:
    """Up slowly (an unpredicted backlog must not pass for a slow cadence), down fast."""
    cal = WallClockCalibration(floor_gain=0.5)
    for i in range(80):
        cal.sent(str(i), float(i), backlog=0.0)
        cal.answered(str(i), 0.8 - cal.floor)
        if i == 4:
            assert cal.floor < 0.4
    assert cal.floor == pytest.approx(0.8, rel=0.01)
    for i in range(100, 110):
        cal.sent(str(i), float(i), backlog=0.0)
        cal.answered(str(i), 0.2 - cal.floor)
    assert cal.floor == pytest.approx(0.2, rel=0.01)
    assert cal.multiplier == 1.0


def test_a_backlog_probe_raises_the_multiplier_and_reanchors_c_hat_once() -> None:
    cal = WallClockCalibration(correction_gain=1.0)
    cal.sent("a", 0.0, backlog=1.0)
    cal.sent("b", 0.1, backlog=1.0)
    first = cal.answered("a", 2.0)  # it waited 3 s, not 1 s
    assert first == pytest.approx(2.0)
    assert cal.multiplier > 1.0
    # "b" saw the same drift; the correction already made is not applied twice
    assert cal.answered("b", 2.0) == pytest.approx(0.0)


def test_unknown_or_untagged_answers_are_ignored() -> None:
    cal = WallClockCalibration()
    assert cal.answered(None, 5.0) == 0.0
    assert cal.answered("never-sent", 5.0) == 0.0
    assert (cal.floor, cal.multiplier) == (0.0, 1.0)


def test_calibrated_las_holds_tau_through_a_spike_on_a_micro_batch_operator() -> None:
    """500 events/s, then a 40 s spike at twice the operator's capacity, with a cost model
    3× too cheap and a ~0.55 s batch floor: the calibrated shedder keeps the real mean
    wait within 25 % of τ, sheds about the excess, and learns the multiplier; blind (the
    paper's model alone), the same shedder misses τ by far."""
    tau = 2.0
    spike = {"base_rate": 500.0, "spike": (10.0, 50.0), "duration": 70.0}
    calibrated = run(tau, rate=2000.0, **spike)  # type: ignore[arg-type]
    assert calibrated.mean_wait <= 1.25 * tau
    assert 0.35 <= calibrated.shed_ratio <= 0.65
    assert calibrated.calibration.multiplier > 1.2  # the model was 3× too cheap
    assert calibrated.calibration.floor == pytest.approx(0.55, abs=0.25)
    blind = run(tau, rate=2000.0, calibrate=False, **spike)  # type: ignore[arg-type]
    assert blind.mean_wait > 2 * tau


def test_calibrated_las_sheds_nothing_when_the_operator_keeps_up() -> None:
    out = run(2.0, rate=500.0)
    assert out.shed_ratio == 0.0
    assert out.calibration.floor == pytest.approx(0.55, abs=0.25)


def test_shedding_everything_still_probes_so_a_wrong_floor_comes_down() -> None:
    """A floor estimate above τ makes every tuple violate; the forced probe (one a second)
    brings the floor back and admission resumes."""
    out = run(2.0, rate=500.0, duration=30.0, calibration=WallClockCalibration(floor=10.0))
    assert out.calibration.floor < 1.0
    late = out.waits[out.waits[:, 0] > 20.0]
    assert len(late) > 0.9 * 500 * 10  # nearly everything admitted again


def test_a_tau_below_the_floor_sheds_only_the_backlog_and_says_so() -> None:
    """τ = 0.3 s under a ~0.55 s batch floor is infeasible: at a rate the operator keeps
    up with, nothing is shed (shedding cannot shorten the batch wait); in a spike, the
    backlog beyond the floor still is."""
    steady = run(0.3, rate=500.0, duration=30.0)
    late = steady.waits[steady.waits[:, 0] > 10.0]
    assert len(late) > 0.95 * 500 * 20
    spike = run(0.3, rate=2000.0, base_rate=500.0, spike=(10.0, 40.0), duration=50.0)
    assert spike.shed_ratio > 0.3
    shedder = StrawManShedder(AverageQueuingLatency(0.3), mean_duration=0.001)
    las = CalibratedShedder(shedder, WallClockCalibration(floor=0.55))
    las.sync()
    assert las.infeasible
    assert shedder.goal.tau == pytest.approx(1.5 * 0.55)  # type: ignore[attr-defined]


def test_horizon_goal_forgets_old_waits_and_admits_within_tau_while_above_it() -> None:
    goal = HorizonAverageQueuingLatency(1.0, horizon_s=10.0)
    goal.at(0.0)
    for _ in range(100):
        goal.record(3.0)  # an excess: estimates that turned out short
    assert goal.violates(1.5)  # above τ and taking the average further from it
    assert not goal.violates(0.8)  # within τ: it brings the average back
    paper = AverageQueuingLatency(1.0)
    for _ in range(100):
        paper.record(3.0)
    assert paper.violates(0.8)  # the listing's CHECK keeps everything out
    goal.at(60.0)  # six horizons later the excess weighs e^-6 of what it did
    assert goal.n == pytest.approx(100 * np.exp(-6.0))
    goal.record(0.5)
    assert goal.Q / goal.n < 1.0
    with pytest.raises(ValueError, match="horizon"):
        HorizonAverageQueuingLatency(1.0, horizon_s=0.0)
