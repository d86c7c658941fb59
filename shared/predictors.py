"""Input-rate predictors for λ̂_G(t+1) (PA-SPS §3.2, the five models of Tables 2 and 6-8).

Each keeps a sliding window of the last ``window`` samples (100 in the paper). A new
predictor is one subclass implementing ``_forecast``. Every prediction is finite and >= 0.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import deque
from typing import Any, ClassVar

import numpy as np


class Predictor(ABC):
    name: ClassVar[str]

    def __init__(self, window: int = 100) -> None:
        if window < 2:
            raise ValueError(f"predictor window must hold at least 2 samples, got {window}")
        self.window = window
        self._samples: deque[float] = deque(maxlen=window)

    def observe(self, value: float) -> None:
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"an input rate sample must be finite and >= 0, got {value}")
        self._samples.append(float(value))

    def predict(self) -> float:
        """λ̂_G(t+1) from the window; never negative, never NaN."""
        if not self._samples:
            return 0.0
        if len(self._samples) < 3:
            return self._samples[-1]
        value = self._forecast(np.fromiter(self._samples, dtype=float, count=len(self._samples)))
        if not math.isfinite(value):
            return self._samples[-1]
        return max(0.0, float(value))

    @abstractmethod
    def _forecast(self, y: np.ndarray) -> float: ...


class Basic(Predictor):
    """t+1 behaves as t did (the model of PSPS, PA-SPS ref. [8])."""

    name = "basic"

    def _forecast(self, y: np.ndarray) -> float:
        return float(y[-1])


class LinearRegression(Predictor):
    """Least-squares line through the window, evaluated one step ahead."""

    name = "lr"

    def _forecast(self, y: np.ndarray) -> float:
        n = len(y)
        x = np.arange(n, dtype=float)
        xm, ym = x.mean(), y.mean()
        sxx = float(((x - xm) ** 2).sum())
        slope = float(((x - xm) * (y - ym)).sum()) / sxx
        return ym + slope * (n - xm)


class FFT(Predictor):
    """The Darts FFT forecaster: remove a polynomial trend, keep the strongest frequencies,
    extend the inverse transform periodically and add the trend back.

    Darts' defaults are ``nr_freqs_to_keep=10`` and no trend; we detrend with a degree-1
    polynomial by default because traffic traces drift, which Darts offers as ``trend="poly"``.
    """

    name = "fft"

    def __init__(self, window: int = 100, nr_freqs_to_keep: int = 10, trend_degree: int = 1):
        super().__init__(window)
        self.nr_freqs_to_keep = nr_freqs_to_keep
        self.trend_degree = trend_degree

    def _forecast(self, y: np.ndarray) -> float:
        n = len(y)
        x = np.arange(n, dtype=float)
        if self.trend_degree > 0:
            coefs = np.polyfit(x, y, self.trend_degree)
            trend = np.polyval(coefs, x)
            next_trend = float(np.polyval(coefs, n))
        else:
            trend = np.zeros(n)
            next_trend = 0.0
        spectrum = np.fft.fft(y - trend)
        keep = min(self.nr_freqs_to_keep, n)
        weakest = np.argsort(np.abs(spectrum))[:-keep]
        spectrum[weakest] = 0
        periodic = np.fft.ifft(spectrum).real
        return float(periodic[0]) + next_trend  # index n wraps to 0 in the periodic extension


class _LaggedRegressor(Predictor):
    """A scikit-learn regressor on lagged values, refitted every ``retrain_every`` samples.

    Refitting a 100-tree forest or an MLP every interval of a 24-hour run at td = 1 s would
    take hours; between refits the last model keeps forecasting from the newest lags.
    """

    def __init__(self, window: int = 100, lags: int = 10, retrain_every: int = 300) -> None:
        super().__init__(window)
        if lags < 1 or lags >= window:
            raise ValueError(f"lags must be in [1, window), got {lags}")
        self.lags = lags
        self.retrain_every = max(1, retrain_every)
        self._model: Any = None
        self._since_fit = 0
        self._scale = 1.0

    def observe(self, value: float) -> None:
        super().observe(value)
        self._since_fit += 1

    @abstractmethod
    def _new_model(self) -> Any: ...

    def _forecast(self, y: np.ndarray) -> float:
        if len(y) <= self.lags + 1:
            return float(y[-1])
        if self._model is None or self._since_fit >= self.retrain_every:
            # Scaling keeps the MLP's default learning rate meaningful for any traffic level.
            self._scale = max(float(y.max()), 1.0)
            ys = y / self._scale
            X = np.lib.stride_tricks.sliding_window_view(ys[:-1], self.lags)
            self._model = self._new_model().fit(X, ys[self.lags :])
            self._since_fit = 0
        last = (y[-self.lags :] / self._scale).reshape(1, -1)
        return float(self._model.predict(last)[0]) * self._scale


class ANN(_LaggedRegressor):
    """scikit-learn ``MLPRegressor`` with its defaults (PA-SPS §3.2, footnote 3)."""

    name = "ann"

    def _new_model(self) -> Any:
        from sklearn.neural_network import MLPRegressor

        return MLPRegressor(random_state=0)


class _FlatForest:
    """A fitted forest's trees stacked into flat arrays, walked for all trees at once.

    scikit-learn's ``predict`` on one sample costs milliseconds of per-call overhead (100
    trees, joblib); a simulation predicts every interval, so 86,400 times a simulated day.
    Same trees, same leaves, same mean: only the walk is ours.
    """

    def __init__(self, forest: Any) -> None:
        lefts, rights, feats, thrs, vals, roots = [], [], [], [], [], []
        offset = 0
        depth = 0
        for est in forest.estimators_:
            t = est.tree_
            n = t.node_count
            idx = np.arange(n)
            leaf = t.children_left == -1
            lefts.append(np.where(leaf, idx, t.children_left) + offset)
            rights.append(np.where(leaf, idx, t.children_right) + offset)
            feats.append(np.where(leaf, 0, t.feature))
            thrs.append(np.where(leaf, np.inf, t.threshold))
            vals.append(t.value[:, 0, 0])
            roots.append(offset)
            offset += n
            depth = max(depth, t.max_depth)
        self.left = np.concatenate(lefts)
        self.right = np.concatenate(rights)
        self.feature = np.concatenate(feats)
        self.threshold = np.concatenate(thrs)
        self.value = np.concatenate(vals)
        self.roots = np.asarray(roots)
        self.depth = depth

    def predict(self, X: np.ndarray) -> np.ndarray:
        x = X[0]
        node = self.roots
        for _ in range(self.depth):
            go_left = x[self.feature[node]] <= self.threshold[node]
            node = np.where(go_left, self.left[node], self.right[node])
        return np.array([self.value[node].mean()])


class RandomForest(_LaggedRegressor):
    """scikit-learn ``RandomForestRegressor`` with its defaults (PA-SPS §3.2, footnote 4)."""

    name = "rf"

    def _new_model(self) -> Any:
        from sklearn.ensemble import RandomForestRegressor

        forest = RandomForestRegressor(random_state=0)

        class _Fitted:
            def fit(self, X: np.ndarray, y: np.ndarray) -> _FlatForest:
                return _FlatForest(forest.fit(X, y))

        return _Fitted()


PREDICTORS: dict[str, type[Predictor]] = {
    cls.name: cls for cls in (Basic, LinearRegression, FFT, ANN, RandomForest)
}


def make_predictor(name: str, **kwargs: Any) -> Predictor:
    try:
        cls = PREDICTORS[name]
    except KeyError:
        raise ValueError(
            f"unknown predictor {name!r}; choose from {', '.join(PREDICTORS)}"
        ) from None
    return cls(**kwargs)
