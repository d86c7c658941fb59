import numpy as np
import pytest

from elastic_sps.model import traces
from elastic_sps.model.traces import TraceError

pytestmark = pytest.mark.unit


def write(tmp_path, text, name="t.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty file"),
        ("time,value\n", "no data rows"),
        ("time,count\n0,1\n", "line 1: no 'value'"),
        ("when,value\n0,1\n", "line 1: no time column"),
        ("time,value\n0,1\n1,abc\n", "line 3: value 'abc' is not a number"),
        ("time,value\n0,1\n1,2\n2,-4\n", "line 4"),
    ],
)
def test_malformed_traces(tmp_path, text, needle):
    with pytest.raises(TraceError) as err:
        traces.load_csv(write(tmp_path, text))
    assert needle in str(err.value)


def test_timestamp_trace_and_rescale(tmp_path):
    p = write(tmp_path, "timestamp,value\n2015-01-01 00:00:00,10\n2015-01-01 00:05:00,40\n")
    t = traces.load_csv(p, slot_s=300)
    assert t.peak_eps == pytest.approx(40 / 300)
    r = t.rescaled(1000)
    assert r.peak_eps == pytest.approx(1000)
    assert r.values[0] == pytest.approx(250 * 300)


@pytest.mark.parametrize("td", [0.5, 1.0, 3.0, 7.0])
def test_per_interval_conserves_events(td):
    t = traces.Trace("x", np.array([10.0, 20.0, 30.0, 40.0, 50.0]), 2.0)
    per = t.per_interval(td)
    assert per.sum() == pytest.approx(150.0)
    assert len(per) == int(np.ceil(10.0 / td))


def test_generator_is_seeded_and_spiky():
    a = traces.spike_workload(duration_s=3600, seed=5)
    b = traces.spike_workload(duration_s=3600, seed=5)
    c = traces.spike_workload(duration_s=3600, seed=6)
    assert np.array_equal(a.values, b.values)
    assert not np.array_equal(a.values, c.values)
    assert a.values.max() > 3 * np.median(a.values)


def test_bundled_traces_load():
    for name in traces.bundled_names():
        assert traces.load(name).duration_s > 0
    with pytest.raises(TraceError, match="bundled"):
        traces.load("no-such-trace")
