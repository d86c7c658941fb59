"""Input-rate predictors for λ̂_G(t+1) (PA-SPS §3.2, the five models of Tables 2 and 6-8).

Each keeps a sliding window of the last ``window`` samples (100 in the paper). A new
predictor is one subclass implementing ``_forecast``. Every prediction is finite and >= 0.

``lr``, ``fft``, ``ann`` and ``rf`` are set up as the PA-SPS authors' code does
(github.com/dwladdimiroc/adaptive-sps-storm, tag ``pa-sps``, ``py/*.py``): each model is
regressed on the *time index* of the last window (no lags) and fitted again at every
analysis, never on fewer than ``MIN_FIT`` samples (the last sample stands in until
then): ``LinearRegression()``, ``MLPRegressor(random_state=1, max_iter=1000)``,
``RandomForestRegressor()``, Darts ``FFT(trend="poly")``. ``ann-lag`` and ``rf-lag`` are
the earlier variants on the last 10 lagged values, kept because they extrapolate spikes
differently.
"""

from __future__ import annotations

import math
import warnings
from abc import ABC, abstractmethod
from collections import deque
from typing import Any, ClassVar

import numpy as np

MIN_FIT = 10  # samples a model is fitted on at the least


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
    """Least-squares line through the window against the time index, evaluated one step
    ahead: scikit-learn's ``LinearRegression`` on one feature, in closed form."""

    name = "lr"

    def _forecast(self, y: np.ndarray) -> float:
        n = len(y)
        if n < MIN_FIT:
            return float(y[-1])
        x = np.arange(n, dtype=float)
        xm, ym = x.mean(), y.mean()
        sxx = float(((x - xm) ** 2).sum())
        slope = float(((x - xm) * (y - ym)).sum()) / sxx
        return ym + slope * (n - xm)


class FFT(Predictor):
    """The Darts FFT forecaster: remove a polynomial trend, keep the strongest frequencies,
    extend the inverse transform periodically and add the trend back.

    The authors use Darts' ``FFT(trend="poly")``: ``nr_freqs_to_keep=10`` and a
    polynomial trend of Darts' default degree, 3.
    """

    name = "fft"

    def __init__(self, window: int = 100, nr_freqs_to_keep: int = 10, trend_degree: int = 3):
        super().__init__(window)
        self.nr_freqs_to_keep = nr_freqs_to_keep
        self.trend_degree = trend_degree

    def _forecast(self, y: np.ndarray) -> float:
        n = len(y)
        if n < MIN_FIT:
            return float(y[-1])
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


class LaggedANN(_LaggedRegressor):
    """scikit-learn ``MLPRegressor`` on the last 10 lagged values (scaled)."""

    name = "ann-lag"

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


class LaggedRandomForest(_LaggedRegressor):
    """scikit-learn ``RandomForestRegressor`` on the last 10 lagged values."""

    name = "rf-lag"

    def _new_model(self) -> Any:
        from sklearn.ensemble import RandomForestRegressor

        forest = RandomForestRegressor(random_state=0)

        class _Fitted:
            def fit(self, X: np.ndarray, y: np.ndarray) -> _FlatForest:
                return _FlatForest(forest.fit(X, y))

        return _Fitted()


class _TimeIndexRegressor(Predictor):
    """A scikit-learn regressor of the window's samples on their time index, fitted
    every ``retrain_every`` analyses (1: every analysis, as the authors do; a larger
    cadence for long runs keeps the last fit, still evaluated at the next index)."""

    def __init__(self, window: int = 100, retrain_every: int = 1) -> None:
        super().__init__(window)
        self.retrain_every = max(1, retrain_every)
        self._model: Any = None
        self._fit_len = 0  # the fitted window's length: its next sample's index
        self._since_fit = 0

    def observe(self, value: float) -> None:
        super().observe(value)
        self._since_fit += 1

    @abstractmethod
    def _new_model(self) -> Any: ...

    def _forecast(self, y: np.ndarray) -> float:
        if len(y) < MIN_FIT:
            return float(y[-1])
        if self._model is None or self._since_fit >= self.retrain_every:
            # the authors' index: 0 … n−1 over the window, the forecast at n
            t = np.arange(len(y), dtype=float).reshape(-1, 1)
            from sklearn.exceptions import ConvergenceWarning

            with warnings.catch_warnings():
                # the authors' MLP rarely converges in max_iter=1000 on raw rates: expected
                warnings.simplefilter("ignore", category=ConvergenceWarning)
                self._model = self._new_model().fit(t, y)
            self._fit_len, self._since_fit = len(y), 0
        ahead = float(self._fit_len + self._since_fit)
        return float(self._model.predict(np.array([[ahead]]))[0])


class ANN(_TimeIndexRegressor):
    """``MLPRegressor(random_state=1, max_iter=1000)`` on the time index (the authors')."""

    name = "ann"

    def _new_model(self) -> Any:
        from sklearn.neural_network import MLPRegressor

        return MLPRegressor(random_state=1, max_iter=1000)


class RandomForest(_TimeIndexRegressor):
    """``RandomForestRegressor()`` on the time index (the authors'; its defaults). A forest
    cannot extrapolate: beyond the window it repeats the leaves of the newest samples."""

    name = "rf"

    def _new_model(self) -> Any:
        from sklearn.ensemble import RandomForestRegressor

        return RandomForestRegressor(random_state=0)


PREDICTORS: dict[str, type[Predictor]] = {
    cls.name: cls
    for cls in (Basic, LinearRegression, FFT, ANN, RandomForest, LaggedANN, LaggedRandomForest)
}
TRAINED = ("ann", "rf", "ann-lag", "rf-lag")  # take ``retrain_every``


def make_predictor(name: str, **kwargs: Any) -> Predictor:
    try:
        cls = PREDICTORS[name]
    except KeyError:
        raise ValueError(
            f"unknown predictor {name!r}; choose from {', '.join(PREDICTORS)}"
        ) from None
    return cls(**kwargs)
