import math

import numpy as np
import pytest

from shared.predictors import PREDICTORS, make_predictor

pytestmark = pytest.mark.unit


def feed(p, values):
    for v in values:
        p.observe(v)
    return p.predict()


def test_basic_repeats_last():
    assert feed(make_predictor("basic"), [5, 9, 7]) == 7


def test_lr_extends_a_line():
    assert feed(make_predictor("lr"), [10 + 3 * k for k in range(50)]) == pytest.approx(160)


def test_lr_window_is_sliding():
    p = make_predictor("lr", window=10)
    feed(p, [1000.0] * 50 + [5.0] * 10)
    assert p.predict() == pytest.approx(5.0)


def test_fft_without_trend_extends_a_periodic_signal_exactly():
    k = np.arange(200)
    y = 500 + 200 * np.sin(2 * np.pi * k / 25)
    pred = feed(make_predictor("fft", trend_degree=0), y[:-1])
    assert pred == pytest.approx(y[-1], abs=1)


def test_fft_trend_removal_helps_on_a_drifting_signal():
    k = np.arange(300)
    y = 500 + 2 * k + 200 * np.sin(2 * np.pi * k / 25)
    detrended = feed(make_predictor("fft"), y[:-1])
    plain = feed(make_predictor("fft", trend_degree=0), y[:-1])
    assert abs(detrended - y[-1]) < abs(plain - y[-1])
    assert detrended == pytest.approx(y[-1], rel=0.06)


@pytest.mark.parametrize("name", ["ann", "rf"])
def test_learned_models_track_a_level(name):
    p = make_predictor(name, retrain_every=1)
    pred = feed(p, [800.0 + (k % 3) for k in range(120)])
    assert 700 < pred < 900


@pytest.mark.parametrize("name", list(PREDICTORS))
def test_never_negative_or_nan(name):
    p = make_predictor(name, **({"retrain_every": 1} if name in ("ann", "rf") else {}))
    pred = feed(p, [max(0.0, 1000 - 40 * k) for k in range(40)])
    assert math.isfinite(pred) and pred >= 0


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_bad_samples_refused(bad):
    with pytest.raises(ValueError):
        make_predictor("lr").observe(bad)


def test_unknown_predictor():
    with pytest.raises(ValueError, match="choose from"):
        make_predictor("oracle")


def test_flat_forest_matches_scikit_learn():
    from sklearn.ensemble import RandomForestRegressor

    from shared.predictors import _FlatForest

    rng = np.random.default_rng(0)
    X, y = rng.random((90, 10)), rng.random(90)
    forest = RandomForestRegressor(random_state=0).fit(X, y)
    flat = _FlatForest(forest)
    for q in rng.random((20, 1, 10)):
        assert flat.predict(q)[0] == pytest.approx(forest.predict(q)[0], rel=1e-9)
