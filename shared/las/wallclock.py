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

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Probe:
    sent_at: float  # the shedder's clock
    backlog: float  # predicted wait beyond the floor, own cost included (s)
    floor: float  # the floor the prediction used (s)
    corrections_mark: float  # cumulative Ĉ corrections when it left


@dataclass
class WallClockCalibration:
    probe_every_s: float = 0.1
    floor_gain: float = 0.3  # EWMA weight of one floor measurement
    multiplier_gain: float = 0.5  # exponent on one probe's ratio (damps noise)
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
        self.in_flight[tag] = Probe(now, max(0.0, backlog), self.floor, self.corrections)
        if len(self.in_flight) > 1000:  # answers lost (a crashed replica): forget the oldest
            self.in_flight.pop(next(iter(self.in_flight)))
        return self.floor + max(0.0, backlog)

    def answered(self, tag: str | None, delta: float) -> float:
        """Learn from Δ = real completion − predicted completion of probe ``tag``; return
        the correction to add to Ĉ."""
        p = self.in_flight.pop(tag, None) if tag is not None else None
        if p is None:
            return 0.0  # not ours (another ingress process, or forgotten): ignore
        observed = p.floor + p.backlog + delta  # the probe's real wait + own cost
        if p.backlog < self.idle_backlog_s:
            self.floor = max(0.0, self.floor + self.floor_gain * (observed - self.floor))
            return 0.0
        real_backlog = max(0.0, observed - self.floor)
        ratio = min(2.0, max(0.5, real_backlog / p.backlog))
        self.multiplier = min(
            self.max_multiplier, max(1.0, self.multiplier * ratio**self.multiplier_gain)
        )
        already = self.corrections - p.corrections_mark
        step = self.correction_gain * ((real_backlog - p.backlog) - already)
        self.corrections += step
        return step
