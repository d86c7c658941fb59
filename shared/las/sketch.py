"""The F and W count-min matrices of LAS (§3.2, Figure 1.A) with 2-universal hashing.

Both matrices share one set of hash functions h_i(x) = ((a_i·x + b_i) mod p) mod c
(Carter-Wegman, p = 2^31 - 1), vectorised over a batch of keys. The (a, b) pairs travel
with the matrices so the operator and the shedder always hash alike.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np

PRIME = (1 << 31) - 1


def dimensions(delta: float, epsilon: float) -> tuple[int, int]:
    """r = ⌈log2(1/δ)⌉ rows and c = round(e/ε) columns: the paper's Figure 1 (δ = 0.25,
    ε = 0.70 -> 2 × 4) and its §5.1 defaults (δ = 0.1, ε = 0.05 -> 4 × 54)."""
    if not (0 < delta < 1):
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    if not (0 < epsilon <= 1):
        raise ValueError(f"epsilon must be in (0, 1], got {epsilon}")
    return max(1, math.ceil(math.log2(1 / delta) - 1e-12)), max(1, round(math.e / epsilon))


def key_to_int(key: str | bytes | int) -> int:
    """A stable integer for any key (Python's hash() is salted per process)."""
    if isinstance(key, int):
        return key % PRIME
    data = key.encode() if isinstance(key, str) else key
    return zlib.crc32(data) % PRIME


@dataclass
class Hashes:
    a: np.ndarray  # int64, shape (r,)
    b: np.ndarray
    cols: int

    @classmethod
    def draw(cls, rows: int, cols: int, seed: int) -> Hashes:
        rng = np.random.default_rng(seed)
        a = rng.integers(1, PRIME, size=rows, dtype=np.int64)
        b = rng.integers(0, PRIME, size=rows, dtype=np.int64)
        return cls(a, b, cols)

    @property
    def rows(self) -> int:
        return len(self.a)

    def columns(self, keys: np.ndarray) -> np.ndarray:
        """Column of each key in each row: shape (r, n). Keys must be in [0, p)."""
        x = np.asarray(keys, dtype=np.int64) % PRIME
        # a < 2^31 and x < 2^31 keep a·x + b below 2^63.
        return ((self.a[:, None] * x[None, :] + self.b[:, None]) % PRIME) % self.cols


@dataclass
class SketchPair:
    """F (frequencies) and W (cumulated execution durations), same shape, same hashes."""

    hashes: Hashes
    F: np.ndarray  # float64 (r, c)
    W: np.ndarray

    @classmethod
    def empty(cls, hashes: Hashes) -> SketchPair:
        shape = (hashes.rows, hashes.cols)
        return cls(hashes, np.zeros(shape), np.zeros(shape))

    def update(self, keys: np.ndarray, durations: np.ndarray) -> None:
        """Listing 3.1 lines 27-30 for a batch."""
        cols = self.hashes.columns(keys)
        for i in range(self.hashes.rows):
            np.add.at(self.F[i], cols[i], 1.0)
            np.add.at(self.W[i], cols[i], durations)

    def estimate(self, keys: np.ndarray) -> np.ndarray:
        """ŵ(t) = W[i, h_i(t)] / F[i, h_i(t)] on the row i of minimum F (Listing 3.2 l. 22-23).

        A key whose cells are all empty gets the sketch's mean duration: the operator has
        never seen anything like it, and the mean is the least surprising guess.
        """
        cols = self.hashes.columns(keys)
        rows = np.arange(self.hashes.rows)[:, None]
        f = self.F[rows, cols]
        w = self.W[rows, cols]
        best = np.argmin(f, axis=0)
        idx = np.arange(f.shape[1])
        fmin = f[best, idx]
        wmin = w[best, idx]
        total_f = self.F[0].sum()
        mean = self.W[0].sum() / total_f if total_f > 0 else 0.0
        out = np.full(len(idx), mean)
        np.divide(wmin, fmin, out=out, where=fmin > 0)
        return out

    def snapshot(self) -> np.ndarray:
        """S[i, j] = W[i, j] / F[i, j] (0 where F is 0)."""
        s = np.zeros_like(self.W)
        np.divide(self.W, self.F, out=s, where=self.F > 0)
        return s

    def copy(self) -> SketchPair:
        return SketchPair(self.hashes, self.F.copy(), self.W.copy())
