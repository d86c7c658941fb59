"""The paper's scenario: the topology's scaling by hand, and the published ordering."""

import json

import pytest

from elastic_sps.services.cli import main
from elastic_sps.simulation import reproduce

pytestmark = pytest.mark.unit


def test_the_pool_just_holds_the_peak_with_the_authors_cost_ratio():
    """Peak 2,000 events/s, 8 replicas: the costliest operator (ratio 2) needs
    8 / 2,000 s = 4 ms an event; the ratio 1 : 2 : 1.5 : 1 gives 2, 4, 3 and 2 ms."""
    topo = reproduce.paper_topology(2000.0, 8)
    assert [op.et_ms for op in topo.operators] == pytest.approx([2.0, 4.0, 3.0, 2.0])
    assert topo.pool_total == 32
    assert topo.capacity_eps() == pytest.approx(2000.0)


def test_the_published_ordering_holds_on_a_spike_trace(capsys):
    """Table 3's shape: static r = 1 loses most events, r = 8 saves nothing and has the
    lowest latency, and every predictor processes at least 98 %."""
    assert main(["reproduce", "pa-sps", "--traces", "short-spikes", "--json"]) == 0
    rows = {r["policy"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["static:1"]["processed_ratio"] < 0.6
    assert rows["static:8"]["saved_resources"] == 0.0
    assert rows["static:8"]["latency_ms"] == min(r["latency_ms"] for r in rows.values())
    for p in reproduce.PREDICTORS:
        assert rows[f"pa-sps:{p}"]["processed_ratio"] >= 0.98, p
    assert rows["pa-sps:ann"]["published"] is None  # no published row for this trace
