"""AUTOSCALE: preventive auto-parallelization (Kotto-Kombi, Lumineau, Lamarre; §IV of
``autoscale-preventive.txt``): LAL (Eqs. 1-6), the global consistency BFS (Algorithm 1)
with GAL (Eqs. 7-10), the decision matrix (Table I) and the new degree (Eq. 11).

Scaled to the simulator: one measurement per interval td, an iteration F_j of ``window``
measurements (Table II: a 60 s window measured every 10 s -> 6), Δ = window × td; a
decision every interval on the sliding window.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from elastic_sps.model.interval_stats import IntervalStats
from elastic_sps.model.topology import SOURCE, Topology
from elastic_sps.policies.base import Analysis, OperatorDecision, PolicyConfigError


class Activity(Enum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


class Action(Enum):
    SCALE_IN = "scale-in"
    NOTHING = "nothing"
    SCALE_OUT = "scale-out"


# Table I. The low-activity row prints one "scale-in" spanning both trend columns.
DECISION_MATRIX: dict[tuple[Activity, bool], Action] = {
    (Activity.LOW, False): Action.SCALE_IN,
    (Activity.LOW, True): Action.SCALE_IN,
    (Activity.MEDIUM, False): Action.NOTHING,
    (Activity.MEDIUM, True): Action.NOTHING,
    (Activity.HIGH, False): Action.NOTHING,
    (Activity.HIGH, True): Action.SCALE_OUT,
    (Activity.CRITICAL, False): Action.SCALE_OUT,
    (Activity.CRITICAL, True): Action.SCALE_OUT,
}


@dataclass(frozen=True)
class AutoscaleParams:
    window: int = 6  # measurements per iteration (Table II: 60 s / 10 s)
    theta_min: float = 0.3
    theta_max: float = 0.8
    combine: str = "max"  # "max": guarantee capacity; "min": save resources
    grace: int = 6  # intervals whose measurements are left out after a reconfiguration

    def __post_init__(self) -> None:
        if self.window < 2:
            raise PolicyConfigError(
                f"autoscale: window must hold at least 2 samples, got {self.window}"
            )
        if not 0 <= self.theta_min < self.theta_max <= 1:
            raise PolicyConfigError(
                "autoscale: need 0 <= theta_min < theta_max <= 1, "
                f"got {self.theta_min}, {self.theta_max}"
            )
        if self.combine not in ("max", "min"):
            raise PolicyConfigError(f"autoscale: combine must be max or min, got {self.combine!r}")
        if self.grace < 0:
            raise PolicyConfigError("autoscale: grace must be >= 0")


def activity(level: float, p: AutoscaleParams) -> Activity:
    """The four activity levels of §IV-C.1 for a LAL or GAL value."""
    if level <= p.theta_min:
        return Activity.LOW
    if level <= p.theta_max:
        return Activity.MEDIUM
    if level <= 1:
        return Activity.HIGH
    return Activity.CRITICAL


def new_degree(current: int, act: Activity, gal: float, max_p: int) -> int:
    """Eq. 11."""
    if act is Activity.HIGH:
        return min(max_p, current + 1)
    return min(max_p, math.ceil(current * gal - 1e-9))


def fit_line(samples: list[float]) -> tuple[float, float]:
    """Least squares f(k) = slope·k + intercept over k = 0..n-1."""
    y = np.asarray(samples, dtype=float)
    x = np.arange(len(y), dtype=float)
    if len(y) < 2:
        return 0.0, float(y[-1]) if len(y) else 0.0
    slope, intercept = np.polyfit(x, y, 1)
    return float(slope), float(intercept)


@dataclass
class OperatorEstimate:
    estim_input: float
    estim_capacity: float
    capacity: float
    selectivity: float
    increasing: bool
    lal: float = 0.0
    gal: float = 0.0


@dataclass
class Autoscale:
    topology: Topology
    params: AutoscaleParams = field(default_factory=AutoscaleParams)
    name: str = "autoscale"

    def __post_init__(self) -> None:
        w = self.params.window
        names = self.topology.names
        self._received: dict[str, deque[float]] = {n: deque(maxlen=w) for n in names}
        self._cap_per_replica: dict[str, deque[float]] = {n: deque(maxlen=w) for n in names}
        self._grace = dict.fromkeys(self.topology.names, 0)
        self._last: dict[str, int] = {}

    def estimates(self, stats: IntervalStats) -> dict[str, OperatorEstimate]:
        """Local scope (Eqs. 1-6) per operator from the window's measurements."""
        p = self.params
        delta = p.window * stats.td
        out = {}
        for op in self.topology.operators:
            s = stats.operators[op.name]
            lat = s.et_s if s.et_s > 0 else op.et_s
            cap_rep = delta / lat  # Eq. 4 for one thread
            hist = self._cap_per_replica[op.name]
            # §IV-B: "scale-in and scale-out actions ... have no impact on monitored values
            # as we take a grace period into account": what is measured while the new
            # degree settles stays out of the windows (decisions go on).
            if self._grace[op.name] == 0 or not hist:
                self._received[op.name].append(s.received)
                hist.append(cap_rep)
            deg = max(1, s.active_replicas)
            capacity = cap_rep * deg
            # Eq. 5: ε_i from the covariance of successive capacities; the paper does not
            # pin its scale, so we take Cov(C_k, C_k+1) / C_{j-1} (a capacity unit).
            eps = 0.0
            if len(hist) >= 3:
                h = np.asarray(hist)
                eps = float(np.cov(h[:-1], h[1:])[0, 1]) / h[-1] * deg
            slope, intercept = fit_line(list(self._received[op.name]))
            n = len(self._received[op.name])
            # Eq. 2: the line summed over the next iteration's measurement points.
            estim_r = sum(max(0.0, slope * (n + k) + intercept) for k in range(p.window))
            estim_input = estim_r + s.queued  # Eq. 3
            estim_cap = max(capacity + eps, 1e-9)
            selectivity = (
                s.emitted / s.processed
                if s.processed > 0
                else sum(e.fraction for e in self.topology.successors[op.name])
            )  # Eq. 7
            e = OperatorEstimate(estim_input, estim_cap, capacity, selectivity, slope > 0)
            e.lal = estim_input / estim_cap  # Eq. 6
            e.gal = e.lal
            out[op.name] = e
        return out

    def global_consistency(
        self, est: dict[str, OperatorEstimate], stats: IntervalStats
    ) -> set[str]:
        """Algorithm 1 over the DAG in BFS (topological) order from the sources' children:
        an operator with a critical parent replaces its input estimate by
        combine(own, Σ parents' EstimOutput) (Eq. 10); the effect propagates downstream.
        Returns the operators so checked (their degree is decided by Algorithm 1's direct
        comparison, not Table I)."""
        combine = max if self.params.combine == "max" else min
        checked: set[str] = set()
        for name in self.topology.order:
            parents = [e for e in self.topology.predecessors[name] if e.src != SOURCE]
            if not parents:
                continue
            if not any(activity(est[e.src].gal, self.params) is Activity.CRITICAL for e in parents):
                continue
            parent_out = 0.0
            for e in parents:
                pe = est[e.src]
                process = min(pe.estim_input, pe.capacity)  # Eq. 8 (Eq. 4 already spans Δ)
                share = self._edge_share(stats, e.src, name, e.fraction)
                parent_out += process * pe.selectivity * share  # Eq. 9, along this edge
            me = est[name]
            me.estim_input = combine(me.estim_input, parent_out)
            me.gal = me.estim_input / me.estim_capacity  # Eq. 10
            checked.add(name)
        return checked

    def _edge_share(self, stats: IntervalStats, src: str, dst: str, fraction: float) -> float:
        """The part of src's output that goes to dst, as measured: what dst received from
        src over what all of src's children received from it (the children's counts lag
        the parent's output alike, so their ratio does not). The declared fractions only
        when no child received anything."""
        children = [e.dst for e in self.topology.successors[src]]
        got = {c: stats.operators[c].received_from.get(src, 0.0) for c in children}
        total = sum(got.values())
        if total > 0:
            return got[dst] / total
        declared = sum(e.fraction for e in self.topology.successors[src])
        return fraction / declared if declared > 0 else 0.0

    def analyze(self, stats: IntervalStats) -> Analysis:
        for op in self.topology.operators:  # a reconfiguration opens a grace period
            current = max(1, stats.operators[op.name].active_replicas)
            if self._last.get(op.name, current) != current:
                self._grace[op.name] = self.params.grace
            elif self._grace[op.name] > 0:
                self._grace[op.name] -= 1
            self._last[op.name] = current
        est = self.estimates(stats)
        checked = self.global_consistency(est, stats)
        decisions = {}
        for op in self.topology.operators:
            current = max(1, stats.operators[op.name].active_replicas)
            e = est[op.name]
            act = activity(e.gal, self.params)
            nd = new_degree(current, act, e.gal, op.max_replicas)
            if op.name in checked:
                target = nd  # Algorithm 1: current vs next, scale-in, nothing or scale-out
            else:
                action = DECISION_MATRIX[(act, e.increasing)]  # Table I
                if action is Action.SCALE_OUT:
                    target = max(current + 1, nd) if act is not Activity.HIGH else nd
                elif action is Action.SCALE_IN:
                    target = min(current, nd)
                else:
                    target = current
            target = max(op.min_replicas, min(op.max_replicas, target))
            decisions[op.name] = OperatorDecision(target, e.estim_input / self.params.window, e.gal)
        predicted = float(np.mean(stats.input_events))
        return Analysis(stats.index, predicted, decisions)
