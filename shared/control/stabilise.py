"""Plan stabilisation: fewer, calmer rescales, for every policy (PA-SPS included).

Seven rules, all off by default (the papers' policies run as written):

* a **scale-down stabilisation window** of N intervals: an operator is scaled in only to
  the highest count any policy recommendation of the last N intervals asked for (the
  Kubernetes HPA's ``stabilizationWindowSeconds`` for scale-down), so a dip of one
  interval between two busy ones changes nothing; after a scale-in the window starts
  again, so a falling need is followed in one step per window, not down a staircase of
  every ask in between; scale-out is never delayed;
* **following a falling need**: when every ask of a full window is below the count and
  none rose on the one before (a steady fall, not a dip), scale in to the latest ask
  (with the margin) rather than the window's highest: holding the oldest ask of a
  falling need only turns one decline into a staircase of rescales, each holding
  replicas the forecast no longer wants;
* a **scale-down margin** of m replicas: scaling in goes only as far as the policy's raw
  need plus m (``ceil(raw + m)``), so a need that hovers just below an integer does not
  flip the count at every interval (a dead band, as the HPA's 10 % tolerance);
* **no scale-down while a backlog is being caught up**: an operator scales in no further
  than the fewest replicas that process its queue plus its predicted input within one
  interval (``Backlog.replicas_to_clear``);
* a **maximum change per step**: at most ``max_step`` replicas added or removed per
  operator per plan;
* a **scale-up tolerance** of u replicas: a policy's raw need at most u above the count
  does not scale out (``ceil(raw - u)`` must exceed it; the HPA's tolerance, up). The
  live need jitters with the micro-batches' measured queue and θ, and a need of 4.1
  against 4 replicas is a queue the next interval's need counts again if it grows; a
  need the latency goal raised always scales out. The tolerance may also be relative
  (``scale_up_tolerance_ratio``: at most r × count above it, the HPA's tolerance is
  relative); the larger of the two holds;
* a **scale-down tolerance** ratio d: a scale-in that would remove less than d × count
  replicas is held (the HPA's tolerance, down): at 8 replicas and d = 0.15 a step to 7
  waits for a need that justifies 6.

Why: a per-interval predictor on a bursty input flaps (PA-SPS changed counts 118 times in
90 s live), and every change costs a micro-batch's re-planning and re-routing.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from elastic_sps.model.analysis import Analysis
from elastic_sps.model.interval_stats import IntervalStats


@dataclass(frozen=True)
class Stabilisation:
    scale_down_window_intervals: int = 0  # 0: scale in as soon as the policy says
    max_step: int | None = None  # replicas per operator per plan; None: unbounded
    scale_down_margin: float = 0.0  # replicas kept above the raw need when scaling in
    hold_on_backlog: bool = False  # no scale-in while the queue is being caught up
    scale_up_tolerance: float = 0.0  # replicas of raw need above the count held without scaling out
    scale_up_tolerance_ratio: float = 0.0  # the same, as a fraction of the count
    scale_down_tolerance_ratio: float = 0.0  # a scale-in of less than this × count is held
    follow_falling_need: bool = False  # a steady fall: scale in to the latest ask
    # a preset's window in seconds (the same hold at any td): ``at_td`` makes it intervals
    scale_down_window_s: float | None = None

    def at_td(self, td: float) -> Stabilisation:
        """These rules at interval length ``td`` (a window in seconds as whole intervals)."""
        if self.scale_down_window_s is None:
            return self
        window = math.ceil(self.scale_down_window_s / td - 1e-9)
        return dataclasses.replace(
            self, scale_down_window_intervals=window, scale_down_window_s=None
        )

    @property
    def enabled(self) -> bool:
        return (
            self.scale_down_window_intervals > 0
            or bool(self.scale_down_window_s)
            or self.max_step is not None
            or self.scale_down_margin > 0
            or self.hold_on_backlog
            or self.scale_up_tolerance > 0
            or self.scale_up_tolerance_ratio > 0
            or self.scale_down_tolerance_ratio > 0
            or self.follow_falling_need
        )


@dataclass(frozen=True)
class Backlog:
    """What an operator must still process: its queue at the end of the interval, the
    events predicted for the next one, and its measured seconds per event."""

    queued: float
    predicted: float
    et_s: float

    def fits(self, replicas: int, td: float) -> bool:
        """Would ``replicas`` clear the queue and the next interval's input within td?"""
        return (self.queued + self.predicted) * self.et_s <= replicas * td

    def replicas_to_clear(self, td: float) -> int:
        """The fewest replicas that ``fits``."""
        return math.ceil((self.queued + self.predicted) * self.et_s / td - 1e-9)


def backlogs(stats: IntervalStats, analysis: Analysis) -> dict[str, Backlog]:
    """Each operator's backlog after ``stats``, from the measured queue and et."""
    return {
        n: Backlog(o.queued, analysis.operators[n].predicted_load, o.et_s)
        for n, o in stats.operators.items()
        if n in analysis.operators
    }


@dataclass
class Stabiliser:
    """Keeps each operator's recent recommendations; ``apply`` limits one plan."""

    rules: Stabilisation
    _seen: dict[str, deque[int]] = field(default_factory=dict)
    # The count each operator was last planned at. The rules compare with it, not with
    # the count the statistics report: live, that one lags a plan or two behind (it is
    # read as an interval's batches commit), and against it a scale-in right after a
    # scale-out looked like no change, so the window never held (the HPA, too, compares
    # with the desired count, not the running one).
    _planned: dict[str, int] = field(default_factory=dict)

    def apply(
        self,
        current: Mapping[str, int],
        wanted: Mapping[str, int],
        raw: Mapping[str, float] | None = None,
        backlog: Mapping[str, Backlog] | None = None,
        td: float = 1.0,
    ) -> tuple[dict[str, int], dict[str, str]]:
        """The targets after the rules, and per operator the rule that limited it.
        ``raw``: the policy's unrounded need (the margin applies where it is > 0);
        ``backlog``: per operator, for the backlog rule."""
        out: dict[str, int] = {}
        limited: dict[str, str] = {}
        for name, want in wanted.items():
            seen = self._seen.setdefault(
                name, deque(maxlen=max(1, self.rules.scale_down_window_intervals))
            )
            seen.append(want)
            cur = self._planned.get(name, current.get(name, want))
            target, rule = self._scale_in(name, cur, want, seen, raw, backlog, td)
            step = self.rules.max_step
            if step is not None and abs(target - cur) > step:
                target = cur + step if target > cur else cur - step
                rule = "max step"
            if target < cur and self.rules.scale_down_window_intervals > 0:
                # one scale-in per window: the next goes to the highest ask since this
                # one, not down a staircase of the asks in between
                seen.extend([target] * self.rules.scale_down_window_intervals)
            out[name] = self._planned[name] = target
            if rule:
                limited[name] = rule
        return out, limited

    def _scale_in(
        self,
        name: str,
        cur: int,
        want: int,
        seen: deque[int],
        raw: Mapping[str, float] | None,
        backlog: Mapping[str, Backlog] | None,
        td: float,
    ) -> tuple[int, str]:
        """The scale-in rules, in order: window (or a falling need), margin, backlog, the
        tolerance; scale-out passes."""
        if want >= cur:
            return self._scale_out(name, cur, want, raw)
        target, rule = want, ""
        # a steady fall is followed at the latest ask (no rule limited it)
        if (
            self.rules.scale_down_window_intervals > 0
            and max(seen) > target
            and not self._falling(cur, seen)
        ):
            target, rule = min(cur, max(seen)), "scale-down window"
        need = (raw or {}).get(name, 0.0)
        if self.rules.scale_down_margin > 0 and need > 0:
            kept = min(cur, math.ceil(need + self.rules.scale_down_margin - 1e-9))
            if kept > target:
                target, rule = kept, "scale-down margin"
        b = (backlog or {}).get(name)
        if self.rules.hold_on_backlog and target < cur and b is not None and not b.fits(target, td):
            target, rule = min(cur, b.replicas_to_clear(td)), "backlog"
        if target < cur and cur - target < self.rules.scale_down_tolerance_ratio * cur:
            target, rule = cur, "scale-down tolerance"
        return target, rule

    def _falling(self, cur: int, seen: deque[int]) -> bool:
        """A full window of asks, all below the count, none above the one before it."""
        asks = list(seen)
        return (
            self.rules.follow_falling_need
            and len(asks) == seen.maxlen
            and max(asks) < cur
            and all(a >= b for a, b in itertools.pairwise(asks))
        )

    def _scale_out(
        self, name: str, cur: int, want: int, raw: Mapping[str, float] | None
    ) -> tuple[int, str]:
        """The tolerance: a need at most ``scale_up_tolerance`` replicas (or
        ``scale_up_tolerance_ratio`` × count, the larger) above the count is held (the
        HPA's tolerance, up). Only a policy's own need: one the goal raised (``want``
        above ``ceil(raw)``) scales out."""
        need = (raw or {}).get(name, 0.0)
        tol = max(self.rules.scale_up_tolerance, self.rules.scale_up_tolerance_ratio * cur)
        own_need = tol > 0 and need > 0 and want <= math.ceil(need - 1e-9)
        if want > cur and own_need and math.ceil(need - tol - 1e-9) <= cur:
            return cur, "scale-up tolerance"
        return want, ""


# The preset benchmarks/bench_stabiliser.py chose on the simulator (td = 1 s): far fewer
# rescales than PA-SPS (lr) on the three traces and the live run's forecast, for little
# of the saved resources (docs/measurements.md, "No flapping").
CALM = Stabilisation(
    scale_down_window_intervals=3,
    scale_down_margin=0.35,
    hold_on_backlog=True,
    scale_up_tolerance=0.35,
    scale_up_tolerance_ratio=0.25,
    scale_down_tolerance_ratio=0.15,
    follow_falling_need=True,
)
# Calm with a scale-down window of 60 s at any td (our DS2's hold): fewer scale-ins, for
# less saved (docs/2026-11-26-control-frontier.md; not the default: it did not halve
# the rescales against DS2's)
STEADY = dataclasses.replace(CALM, scale_down_window_s=60.0)
# Calm with a 5-min scale-down window (Flink's autoscaler waits an hour by default):
# chosen on the three bundled traces as the shortest window that halved the rescales
# against DS2 on all six of their cases; it saves less, and PA-SPS's latency there lies
# above DS2's frontier (docs/2026-11-26-control-frontier.md; not the default)
PATIENT = dataclasses.replace(CALM, scale_down_window_s=300.0)
PRESETS = {"calm": CALM, "steady": STEADY, "patient": PATIENT, "none": Stabilisation()}
# What a user who sets nothing gets (SPS_STABILISER; docs/measurements.md, "No flapping")
DEFAULT_STABILISER = "calm"


# Each rule's description, for the plan service's settings and the simulator's flags
# (the window is given in seconds there, and kept in intervals of td here).
RULE_HELP = {
    "scale_down_window_s": "Scale in only to the highest count asked for in this window (s).",
    "max_step": "Most replicas changed per operator per plan.",
    "scale_down_margin": "Scale in only as far as the raw need plus this many replicas.",
    "hold_on_backlog": "No scale-in below what clears the queue within one interval.",
    "scale_up_tolerance": "A raw need at most this many replicas above the count does not "
    "scale out.",
    "scale_up_tolerance_ratio": "The same, as a fraction of the count (the larger holds).",
    "scale_down_tolerance_ratio": "A scale-in of fewer than this fraction of the count is held.",
    "follow_falling_need": "A need that fell through the whole window is followed at its "
    "latest ask.",
}


def build_rules(
    preset: Stabilisation,
    td: float,
    scale_down_window_s: float | None = None,
    **rules: float | bool | None,
) -> Stabilisation:
    """The stabiliser's rules: ``preset`` with every rule given (not None) over it, the
    window given in seconds and kept in whole intervals of ``td`` (rounded up)."""
    preset = preset.at_td(td)
    window = (
        preset.scale_down_window_intervals
        if scale_down_window_s is None
        else math.ceil(scale_down_window_s / td - 1e-9)
    )
    given = {k: v for k, v in rules.items() if v is not None}
    return dataclasses.replace(preset, scale_down_window_intervals=window, **given)  # type: ignore[arg-type]


def split_spec(spec: str) -> tuple[str, Stabilisation | None]:
    """``pa-sps:lr+calm`` -> (``pa-sps:lr``, CALM): a policy and the stabiliser preset it
    runs with (None: the run's own settings; ``default``: the services' preset)."""
    policy, _, preset = spec.partition("+")
    if not preset and policy == "default":  # the services' default runs with theirs
        preset = DEFAULT_STABILISER
    if not preset:
        return policy, None
    if preset not in PRESETS:
        raise ValueError(f"unknown stabiliser preset {preset!r} in {spec!r}: {sorted(PRESETS)}")
    return policy, PRESETS[preset]


def plan_env(rules: Stabilisation, td: float) -> dict[str, str]:
    """The plan service's settings (elastic_sps.settings.PlanSettings) for exactly these rules
    (no preset under them: ``Stabilisation()`` gives a plan with no stabiliser)."""
    rules = rules.at_td(td)
    env = {
        "SPS_STABILISER": "none",
        "SPS_SCALE_DOWN_WINDOW_S": str(rules.scale_down_window_intervals * td),
        "SPS_SCALE_DOWN_MARGIN": str(rules.scale_down_margin),
        "SPS_HOLD_ON_BACKLOG": str(rules.hold_on_backlog).lower(),
        "SPS_SCALE_UP_TOLERANCE": str(rules.scale_up_tolerance),
        "SPS_SCALE_UP_TOLERANCE_RATIO": str(rules.scale_up_tolerance_ratio),
        "SPS_SCALE_DOWN_TOLERANCE_RATIO": str(rules.scale_down_tolerance_ratio),
        "SPS_FOLLOW_FALLING_NEED": str(rules.follow_falling_need).lower(),
    }
    if rules.max_step is not None:
        env["SPS_MAX_STEP"] = str(rules.max_step)
    return env
