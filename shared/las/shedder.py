"""The LAS load shedder (§3.2, Listing 3.2 and Figure 3): NOP / SEND / RUN, and the
interface every shedder implements.

Time is in seconds on the shedder's clock. Ĉ is kept as the estimated completion time of
the last admitted tuple, measured from the first tuple; the paper's q̂ = Ĉ − elapsed then
is the estimated queuing latency. One deviation, on purpose: when the operator would be
idle (Ĉ < elapsed) we move Ĉ up to ``elapsed`` before adding ŵ — an idle operator does
not bank capacity for later, so a burst after a lull is not admitted wholesale.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from enum import Enum

import numpy as np

from elastic_sps.las.sketch import SketchPair


class LatencyGoal(ABC):
    """CHECK (Listing 3.2 lines 30-37): is admitting a tuple with estimated queuing
    latency q a violation of the goal? Swap in another goal (a percentile, a window)."""

    @abstractmethod
    def violates(self, q: float) -> bool: ...

    @abstractmethod
    def record(self, q: float) -> None: ...

    def at(self, now: float) -> None:  # noqa: B027 - optional hook, a no-op by default
        """The shedder's clock before each batch (goals over a time horizon use it)."""


class AverageQueuingLatency(LatencyGoal):
    """AVG(τ): the average queuing latency of admitted tuples stays within τ.

    Listing 3.2 line 31 reads ``Q/ℓ > τ``; the text says CHECK *tries to add* q̂ to the
    average, so we test (Q + q)/(ℓ + 1) > τ, which is what the text describes.
    """

    def __init__(self, tau_s: float) -> None:
        if not (math.isfinite(tau_s) and tau_s > 0):
            raise ValueError(f"tau must be a positive number of seconds, got {tau_s}")
        self.tau = tau_s
        self.Q = 0.0
        self.n = 0

    def violates(self, q: float) -> bool:
        return (self.Q + q) / (self.n + 1) > self.tau

    def record(self, q: float) -> None:
        self.Q += q
        self.n += 1


class HorizonAverageQueuingLatency(AverageQueuingLatency):
    """AVG(τ) over roughly the last ``horizon_s`` seconds: Q and ℓ decay by
    exp(−Δt / horizon). Beyond the paper, whose average runs over one experiment: in a
    service that runs for days a whole-run average lets hours of light load pay for
    minutes of overload. And while the average is above τ (the estimates behind it were
    short, or τ just moved), a tuple whose own wait is within τ is admitted: it brings
    the average towards τ, where the listing's CHECK would keep every tuple out until
    the excess is forgotten."""

    def __init__(self, tau_s: float, horizon_s: float = 30.0) -> None:
        super().__init__(tau_s)
        if not (math.isfinite(horizon_s) and horizon_s > 0):
            raise ValueError(f"horizon must be a positive number of seconds, got {horizon_s}")
        self.horizon = horizon_s
        self.last: float | None = None
        self.n: float = 0.0  # type: ignore[assignment]

    def violates(self, q: float) -> bool:
        return q > self.tau and super().violates(q)

    def at(self, now: float) -> None:
        if self.last is not None and now > self.last:
            f = math.exp(-(now - self.last) / self.horizon)
            self.Q *= f
            self.n *= f
        self.last = now if self.last is None else max(self.last, now)


class ShedderState(Enum):
    NOP = "NOP"
    SEND = "SEND"
    RUN = "RUN"


class Shedder(ABC):
    """Decides, per tuple, whether to drop it (True) or admit it (False)."""

    name: str

    @abstractmethod
    def shed_batch(self, keys: np.ndarray, now: np.ndarray) -> np.ndarray:
        """Decisions for tuples arriving at times ``now`` (seconds, non-decreasing)."""

    def shed(self, key: int, now: float) -> bool:
        return bool(self.shed_batch(np.array([key], dtype=np.int64), np.array([now]))[0])


class CostModelShedder(Shedder):
    """The shedding rule shared by LAS, Straw-Man and Full Knowledge (§5.1): admit while
    CHECK holds, charging each admitted tuple its estimated duration ŵ(t) × (1 + ε),
    divided by the active replica count (replica-aware capacity)."""

    def __init__(self, goal: LatencyGoal, correction: float = 0.0, replicas: int = 1) -> None:
        self.goal = goal
        self.correction = correction
        self.replicas = max(1, replicas)
        self.C_hat = 0.0
        self.t0: float | None = None
        self.state = ShedderState.RUN
        self.on_piggyback: Callable[[int, float], None] | None = None
        # Work-conserving Ĉ (see the module docstring). Where Δ replies arrive steadily,
        # as in the ensemble, they re-anchor Ĉ to real completions, idle gaps included,
        # and the listing's plain Ĉ is kept (``idle_clamp = False``).
        self.idle_clamp = True
        # A wait every tuple sees whatever the backlog (a micro-batch engine's cadence);
        # 0 in the paper's model. See elastic_sps.las.wallclock.
        self.floor = 0.0

    _admitted_since_probe = 0

    def _probe_every(self) -> int:
        """Piggy-back Ĉ on every k-th admitted tuple as well as after a sketch (0: only
        after a sketch, as Listing 3.2)."""
        return 0

    def set_replicas(self, n: int) -> None:
        self.replicas = max(1, int(n))

    @abstractmethod
    def _estimates(self, keys: np.ndarray) -> np.ndarray: ...

    def shed_batch(self, keys: np.ndarray, now: np.ndarray) -> np.ndarray:
        n = len(keys)
        drop = np.zeros(n, dtype=bool)
        if n == 0 or self.state is ShedderState.NOP:  # lines 15-17
            if n and self.t0 is None:
                self.t0 = float(now[0])
            return drop
        if self.t0 is None:
            self.t0 = float(now[0])
        self.goal.at(float(now[0]))
        w = self._estimates(keys) * ((1.0 + self.correction) / self.replicas)
        elapsed = (np.asarray(now, dtype=float) - self.t0).tolist()
        w_list = w.tolist()
        goal = self.goal
        violates, record = goal.violates, goal.record
        c_hat = self.C_hat
        floor = self.floor
        send = self.state is ShedderState.SEND
        probe_every = self._probe_every()
        for k in range(n):
            e = elapsed[k]
            if c_hat < e and self.idle_clamp:
                c_hat = e
            q = floor + max(0.0, c_hat - e)  # line 18; a negative wait is no wait
            if violates(q):  # lines 19-21
                drop[k] = True
                continue
            record(q)
            c_hat += w_list[k]  # line 23
            if probe_every:
                self._admitted_since_probe += 1
                send = send or self._admitted_since_probe >= probe_every
            if send:  # lines 24-27: piggy-back Ĉ on this tuple
                send = False
                self._admitted_since_probe = 0
                self.state = ShedderState.RUN
                if self.on_piggyback is not None:
                    self.on_piggyback(k, c_hat)
                self._probe_sent()
                probe_every = self._probe_every()
        self.C_hat = c_hat
        return drop

    def _probe_sent(self) -> None:
        """A hook: Ĉ was just piggy-backed on an admitted tuple."""

    def admit(self, key: int, now: float) -> float:
        """Admit one tuple regardless of CHECK, recording its wait in the goal like any
        admitted tuple; return Ĉ after it."""
        if self.t0 is None:
            self.t0 = now
        self.goal.at(now)
        e = now - self.t0
        if self.C_hat < e and self.idle_clamp:
            self.C_hat = e
        self.goal.record(self.floor + max(0.0, self.C_hat - e))
        w = self._estimates(np.array([key], dtype=np.int64))[0]
        self.C_hat += float(w) * (1.0 + self.correction) / self.replicas
        return self.C_hat

    def apply_delta(self, delta: float) -> None:
        """Listing 3.2 lines 11-13."""
        self.C_hat += delta


class LasShedder(CostModelShedder):
    """LAS: ŵ from the operator's (F, W); NOP until the first pair arrives.

    ``bootstrap_mean`` (seconds) goes beyond Listing 3.2: while no sketch has arrived the
    shedder charges every tuple this mean (the operator's benchmarked et_i) instead of
    admitting everything blindly. Under sustained overload the paper's NOP lets a backlog
    of seconds build before the first stable sketch (≥ 2N tuples) and the Δ reply (which
    waits behind that backlog) arrive. ``None`` keeps the paper's NOP exactly.

    ``bootstrap_probe_every`` (with a bootstrap mean): until the first sketch, piggy-back
    Ĉ on every k-th admitted tuple so the operator's Δ (Listing 3.1 lines 11-14, which
    answers any piggy-backed Ĉ) re-anchors Ĉ to real completions. A benchmarked mean
    below the stream's true W̄ otherwise builds, unseen, a backlog over the ≥ 2N tuples
    before the first stable sketch, and every later tuple waits behind it.

    ``keep_probing`` (beyond Listing 3.2, which piggy-backs Ĉ only after a new sketch):
    once sketches flow, piggy-back Ĉ on the next admitted tuple whenever no Δ is awaited,
    so Ĉ is re-anchored to real completions about once per queue length. Without it a
    stable sketch stops the Δ replies, and Ĉ drifts from the real backlog as a random walk
    of the per-tuple estimate errors (w − ŵ): on the §5.1 grid the real mean queuing
    latency reached 2.3 τ on a uniform stream, where the collided sketch estimates each
    tuple near the mean. One probe at a time, because a second Ĉ piggy-backed before the
    first Δ is applied carries the same error again and the two Δs correct it twice.
    """

    name = "las"

    def __init__(
        self,
        goal: LatencyGoal,
        epsilon: float = 0.05,
        replicas: int = 1,
        bootstrap_mean: float | None = None,
        bootstrap_probe_every: int = 0,
        keep_probing: bool = False,
    ) -> None:
        super().__init__(goal, correction=epsilon, replicas=replicas)
        self.keep_probing = keep_probing
        self._awaiting_delta = False
        if bootstrap_probe_every < 0:
            raise ValueError(f"bootstrap_probe_every must be >= 0, got {bootstrap_probe_every}")
        self.bootstrap_mean = bootstrap_mean
        self.bootstrap_probe_every = bootstrap_probe_every if bootstrap_mean is not None else 0
        self.state = ShedderState.NOP if bootstrap_mean is None else ShedderState.RUN
        self.pair: SketchPair | None = None
        self.sketches_received = 0

    def receive_sketch(self, pair: SketchPair) -> None:
        """Listing 3.2 lines 7-10 (Figure 3.A and 3.D)."""
        self.pair = pair
        self.state = ShedderState.SEND
        self.sketches_received += 1

    def _probe_every(self) -> int:
        if self.pair is None:
            return self.bootstrap_probe_every
        return 1 if self.keep_probing and not self._awaiting_delta else 0

    def _probe_sent(self) -> None:
        self._awaiting_delta = self.keep_probing and self.pair is not None

    def apply_delta(self, delta: float) -> None:
        super().apply_delta(delta)
        self._awaiting_delta = False

    def _estimates(self, keys: np.ndarray) -> np.ndarray:
        if self.pair is None:
            return np.full(len(keys), self.bootstrap_mean or 0.0)
        return self.pair.estimate(keys)


class StrawManShedder(CostModelShedder):
    """Straw-Man (§5.1): the same rule with the mean duration w̄ for every tuple."""

    name = "strawman"

    def __init__(self, goal: LatencyGoal, mean_duration: float, replicas: int = 1) -> None:
        super().__init__(goal, replicas=replicas)
        self.mean = mean_duration

    def _estimates(self, keys: np.ndarray) -> np.ndarray:
        return np.full(len(keys), self.mean)


class FullKnowledgeShedder(CostModelShedder):
    """Full Knowledge (§5.1): the same rule with the exact w(t)."""

    name = "full"

    def __init__(
        self, goal: LatencyGoal, duration_of: Callable[[np.ndarray], np.ndarray], replicas: int = 1
    ) -> None:
        super().__init__(goal, replicas=replicas)
        self.duration_of = duration_of

    def _estimates(self, keys: np.ndarray) -> np.ndarray:
        return np.asarray(self.duration_of(keys), dtype=float)


class BaseLineShedder(Shedder):
    """Base Line (§5.1): drops at random the under-provisioned fraction of tuples."""

    name = "baseline"

    def __init__(self, underprovision: float, seed: int = 0) -> None:
        self.fraction = min(1.0, max(0.0, underprovision))
        self.rng = np.random.default_rng(seed)

    def shed_batch(self, keys: np.ndarray, now: np.ndarray) -> np.ndarray:
        return self.rng.random(len(keys)) < self.fraction
