"""The LAS operator (§3.2, Listing 3.1 and Figure 2): START / STABILIZING.

The operator updates F and W with each executed tuple. Every N tuples it compares the
snapshot S with W/F (Eq. 1); once the relative error η is within μ it sends (F, W) to the
shedder, resets them and goes back to START. It answers a piggy-backed Ĉ with Δ = C − Ĉ.
Outgoing messages go through ``publish_sketch`` / ``send_delta`` so the transport (an
in-process queue, Redis) is the caller's choice.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

import numpy as np

from elastic_sps.las.sketch import Hashes, SketchPair, dimensions


class OperatorState(Enum):
    START = "START"
    STABILIZING = "STABILIZING"


def relative_error(snapshot: np.ndarray, pair: SketchPair) -> float:
    """Eq. 1: η = Σ|S − W/F| / Σ S."""
    denom = float(snapshot.sum())
    if denom <= 0:
        return float("inf")
    return float(np.abs(snapshot - pair.snapshot()).sum()) / denom


class LasOperator:
    def __init__(
        self,
        publish_sketch: Callable[[SketchPair], object],
        send_delta: Callable[[float], None],
        delta: float = 0.1,
        epsilon: float = 0.05,
        window: int = 1024,
        tolerance: float = 0.05,
        seed: int = 0,
    ) -> None:
        if window < 1:
            raise ValueError(f"window N must be >= 1, got {window}")
        if tolerance < 0:
            raise ValueError(f"tolerance mu must be >= 0, got {tolerance}")
        rows, cols = dimensions(delta, epsilon)
        self.pair = SketchPair.empty(Hashes.draw(rows, cols, seed))
        self.S = np.zeros_like(self.pair.F)
        self.window = window
        self.tolerance = tolerance
        self.state = OperatorState.START
        self.m = 0
        self.C = 0.0  # cumulated execution duration (or the caller's completion clock)
        self._publish = publish_sketch
        self._send_delta = send_delta
        self.sketches_sent = 0

    def update(
        self,
        key: int,
        duration: float,
        c_hat: float | None = None,
        completed_at: float | None = None,
    ) -> None:
        """Listing 3.1 UPDATE for one executed tuple.

        ``completed_at`` is the tuple's completion time on the shedder's clock when the
        caller has one (then C is that time, idle gaps included, matching the shedder's
        work-conserving Ĉ); otherwise C accumulates durations as in the paper.
        """
        self.m += 1
        self.C = completed_at if completed_at is not None else self.C + duration
        if c_hat is not None:  # lines 11-14
            self._send_delta(self.C - c_hat)
        if self.m % self.window == 0:
            if self.state is OperatorState.START:  # Figure 2.A
                self.S = self.pair.snapshot()
                self.state = OperatorState.STABILIZING
            elif relative_error(self.S, self.pair) <= self.tolerance:  # Figure 2.C
                self._publish(self.pair.copy())
                self.sketches_sent += 1
                self.state = OperatorState.START
                self.pair = SketchPair.empty(self.pair.hashes)
            else:  # Figure 2.B
                self.S = self.pair.snapshot()
        # lines 27-30
        self.pair.update(np.array([key], dtype=np.int64), np.array([duration]))

    def update_batch(self, keys: np.ndarray, durations: np.ndarray) -> None:
        """Many tuples at once, with no piggy-backed request among them (the fast path)."""
        keys = np.asarray(keys, dtype=np.int64)
        durations = np.asarray(durations, dtype=float)
        start = 0
        n = len(keys)
        while start < n:
            # Cut the batch at the next window boundary, where the state machine runs.
            to_boundary = self.window - (self.m % self.window)
            end = min(n, start + to_boundary)
            chunk = slice(start, end)
            if end - start == to_boundary:
                # the boundary tuple: everything before it, then it through update()
                if end - 1 > start:
                    self._bulk(keys[start : end - 1], durations[start : end - 1])
                self.update(int(keys[end - 1]), float(durations[end - 1]))
            else:
                self._bulk(keys[chunk], durations[chunk])
            start = end

    def _bulk(self, keys: np.ndarray, durations: np.ndarray) -> None:
        self.m += len(keys)
        self.C += float(durations.sum())
        self.pair.update(keys, durations)
