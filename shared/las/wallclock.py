"""Calibrating LAS's cost model to a micro-batch engine's wall clock (beyond the paper).

LAS (§3.2) models the operator as a queue that starts a tuple as soon as the previous one
ends: the wait of a new tuple is Ĉ − now, with Ĉ advanced by ŵ(t) per admitted tuple, and
one Δ = real completion − Ĉ at a time re-anchors Ĉ (Listing 3.2 l. 11-13, 24-27).
A Spark micro-batch operator breaks two assumptions of that model:

* every event waits for the next batch whatever the backlog (the *floor*: trigger
  interval, planning, the other queries sharing the cores), and
* an event costs more wall-clock time than the execution time the sketches measure (a
  batch's fixed overheads are spread over its events): ŵ needs a *multiplier*.

So the estimated wait is ``floor + max(0, Ĉ − now)`` with Ĉ advanced by ŵ × multiplier,
and both unknowns are learned from probes: an admitted event is tagged every
``probe_every_s`` with its predicted completion; the entry operator answers Δ. A probe
sent with (almost) no predicted backlog measures the floor; one sent with a backlog
measures the multiplier and re-anchors Ĉ as Δ does in the listing. Several probes are in
flight at once (one round trip is a whole wait, seconds here), so each Δ is applied net
of the corrections made since its probe left — otherwise one drift would count as often
as probes are in flight.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from elastic_sps.las.shedder import AverageQueuingLatency, CostModelShedder, ShedderState


@dataclass(frozen=True)
class Probe:
    sent_at: float  # the shedder's clock
    backlog: float  # predicted wait beyond the floor, own cost included (s)
    floor: float  # the floor the prediction used (s)
    corrections_mark: float  # cumulative Ĉ corrections when it left
    multiplier: float  # the multiplier the prediction used


@dataclass
class WallClockCalibration:
    probe_every_s: float = 0.1
    floor_gain: float = 0.3  # EWMA weight of one floor measurement
    multiplier_gain: float = 0.3  # weight of one probe's estimate (in log space)
    correction_gain: float = 0.5  # share of a Δ applied to Ĉ
    idle_backlog_s: float = 0.05  # below this, a probe measures the floor
    max_multiplier: float = 1000.0
    floor: float = 0.0
    multiplier: float = 1.0
    corrections: float = 0.0
    last_probe_at: float = float("-inf")
    in_flight: dict[str, Probe] = field(default_factory=dict)

    def due(self, now: float) -> bool:
        return now - self.last_probe_at >= self.probe_every_s

    def sent(self, tag: str, now: float, backlog: float) -> float:
        """Record a probe; return the predicted completion (relative, add the epoch)."""
        self.last_probe_at = now
        self.in_flight[tag] = Probe(
            now, max(0.0, backlog), self.floor, self.corrections, self.multiplier
        )
        if len(self.in_flight) > 1000:  # answers lost (a crashed replica): forget the oldest
            self.in_flight.pop(next(iter(self.in_flight)))
        return self.floor + max(0.0, backlog)

    def answered(self, tag: str | None, delta: float) -> float:
        """Learn from Δ = real completion − predicted completion of probe ``tag``; return
        the correction to add to Ĉ.

        A wait above the floor is read as backlog the model missed (re-anchoring Ĉ, as
        the listing's Δ does); a probe sent with no predicted backlog also moves the
        floor, down quickly and up slowly — an unpredicted backlog must not pass for a
        slow batch cadence, or the floor would climb past τ and shed everything.
        """
        p = self.in_flight.pop(tag, None) if tag is not None else None
        if p is None:
            return 0.0  # not ours (another ingress process, or forgotten): ignore
        observed = p.floor + p.backlog + delta  # the probe's real wait + own cost
        if p.backlog < self.idle_backlog_s:
            gain = self.floor_gain if observed < self.floor else self.floor_gain / 6
            self.floor = max(0.0, self.floor + gain * (observed - self.floor))
        real_backlog = max(0.0, observed - self.floor)
        if p.backlog >= self.idle_backlog_s:
            # Each probe estimates the multiplier itself (relative to the one it was sent
            # with), so probes in flight together do not compound one drift.
            implied = p.multiplier * min(4.0, max(0.25, real_backlog / p.backlog))
            implied = min(self.max_multiplier, max(1.0, implied))
            self.multiplier *= (implied / self.multiplier) ** self.multiplier_gain
        already = self.corrections - p.corrections_mark
        step = self.correction_gain * ((real_backlog - p.backlog) - already)
        self.corrections += step
        return step


class CalibratedShedder:
    """A cost-model shedder (LAS, Straw-Man, Full Knowledge) driven by the calibration:
    decides a batch, tags probes, and applies answers. The ingress and the tests run
    this same loop."""

    def __init__(
        self,
        shedder: CostModelShedder,
        calibration: WallClockCalibration | None = None,
        max_silence_s: float = 1.0,
        backlog_headroom: float = 0.5,
    ) -> None:
        self.shedder = shedder
        self.backlog_headroom = backlog_headroom
        # The user's τ; the goal's τ may be raised above it while it is infeasible.
        goal = shedder.goal
        self.tau: float | None = goal.tau if isinstance(goal, AverageQueuingLatency) else None
        self.calibration = calibration or WallClockCalibration()
        self.epsilon = shedder.correction
        self.max_silence_s = max_silence_s
        self._carry: dict[int, float] = {}
        shedder.on_piggyback = lambda k, c_hat: self._carry.__setitem__(k, c_hat)
        # Scaling before shedding: while held, every tuple is admitted and charged as
        # usual (Ĉ and the goal's average stay true), so shedding resumes from the real
        # backlog once the plan says scaling cannot meet the need (``sync`` applies it).
        self.held = False

    def decide(
        self, keys: np.ndarray, now: float, tags: Sequence[str]
    ) -> tuple[np.ndarray, dict[int, float]]:
        """Drop flags for tuples arriving ``now``, and the probes among the admitted:
        index -> predicted completion (seconds after ``now``)."""
        sh, cal = self.shedder, self.calibration
        self._carry.clear()
        if cal.due(now):
            sh.state = ShedderState.SEND  # Listing 3.2 l. 24-27: this batch carries a probe
        drop = sh.shed_batch(keys, np.full(len(keys), now))
        if (
            not self._carry
            and len(keys)
            and drop.all()
            and now - cal.last_probe_at >= self.max_silence_s
        ):
            # Shedding everything sends no probe, and without answers the estimates
            # could never come down: admit one tuple regardless of CHECK (it counts in
            # the goal like any other).
            drop[0] = False
            self._carry[0] = sh.admit(int(keys[0]), now)
        assert sh.t0 is not None
        probes = {
            k: cal.sent(tags[k], now, c_hat - (now - sh.t0)) for k, c_hat in self._carry.items()
        }
        return drop, probes

    def answer(self, tag: str | None, delta: float) -> None:
        self.shedder.apply_delta(self.calibration.answered(tag, delta))

        self.sync()

    def sync(self) -> None:
        self.shedder.floor = self.calibration.floor
        self.shedder.correction = (1.0 + self.epsilon) * self.calibration.multiplier - 1.0
        goal = self.shedder.goal
        if self.held and isinstance(goal, AverageQueuingLatency):
            goal.tau = math.inf  # CHECK always holds: nothing is shed
        elif self.tau is not None and isinstance(goal, AverageQueuingLatency):
            # A τ at or below the floor cannot be met by shedding (every tuple waits the
            # floor, however few are admitted): shed only what a backlog beyond the floor
            # would add, instead of everything.
            goal.tau = max(self.tau, (1.0 + self.backlog_headroom) * self.calibration.floor)

    @property
    def infeasible(self) -> bool:
        """τ is below what the engine's floor allows (see ``sync``)."""
        return (
            self.tau is not None
            and self.calibration.floor * (1.0 + self.backlog_headroom) > self.tau
        )

    def estimated_wait(self, now: float) -> float:
        sh = self.shedder
        t0 = sh.t0 if sh.t0 is not None else now
        return sh.floor + max(0.0, sh.C_hat - (now - t0))
