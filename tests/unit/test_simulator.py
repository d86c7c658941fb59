import json

import numpy as np
import pytest

from elastic_sps.model import topology, traces
from elastic_sps.model.topology import Operator
from elastic_sps.policies import make_policy
from elastic_sps.services.cli import main
from elastic_sps.simulation.simulator import simulate

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def spike_results():
    topo = topology.load("twitter")
    arrivals = traces.load("spikes").per_interval(1.0)
    return {
        spec: simulate(topo, arrivals, make_policy(spec, topo), 1.0).metrics
        for spec in ("pa-sps:lr", "static:1", "static:8")
    }


def test_pa_sps_keeps_events_flowing_with_fewer_replicas(spike_results):
    pa, s1, s8 = spike_results["pa-sps:lr"], spike_results["static:1"], spike_results["static:8"]
    assert pa.processed_ratio >= 0.999
    assert pa.replicas_mean < s8.replicas_mean
    assert pa.saved_resources > 0.3
    assert s1.processed_ratio < 0.99  # the paper's r = 1 loses throughput (Table 3)
    assert s1.throughput_degradation > pa.throughput_degradation
    assert s8.saved_resources == pytest.approx(0.0)


def test_flow_is_conserved_and_activation_waits_an_interval():
    topo = topology.linear("one", [Operator("a", 10.0, 1, 8)])  # 100 events/s per replica
    arrivals = np.array([100.0, 500.0, 500.0, 500.0, 0.0, 0.0])
    res = simulate(topo, arrivals, make_policy("pa-sps:basic", topo), 1.0)
    s = res.series
    # The spike at t=1 is seen at its end and acted on at t=2: 500 predicted + 400 queued
    # events × 10 ms = 9 replicas, bounded by the pool of 8.
    assert s.replicas["a"][:3] == [1, 1, 8]
    assert sum(s.processed) + s.queued[-1] == pytest.approx(arrivals.sum())
    assert s.queued[1] == pytest.approx(400.0)


def test_budget_caps_total_replicas():
    topo = topology.load("twitter")
    arrivals = traces.load("spikes").per_interval(1.0)
    res = simulate(topo, arrivals, make_policy("pa-sps:basic", topo), 1.0, budget=10)
    assert res.series.total_replicas().max() <= 10


def test_cli_simulate_json(capsys):
    rc = main(
        [
            "simulate",
            "--topology",
            "twitter",
            "--trace",
            "short-spikes",
            "--policy",
            "pa-sps",
            "--predictor",
            "lr",
            "--td",
            "1",
            "--json",
        ]
    )
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    for key in (
        "saved_resources",
        "throughput_degradation",
        "processed_ratio",
        "latency_ms",
        "error_input",
        "error_replica",
        "replicas_mean",
        "replicas_max",
    ):
        assert key in doc


def test_cli_compare_and_plot(tmp_path, capsys):
    png = tmp_path / "run.png"
    rc = main(
        [
            "compare",
            "--trace",
            "short-spikes",
            "--policies",
            "pa-sps:lr,static:8",
            "--json",
            "--plot",
            str(png),
        ]
    )
    assert rc == 0
    docs = json.loads(capsys.readouterr().out)
    assert [d["policy"] for d in docs] == ["pa-sps:lr", "static:8"]
    assert png.stat().st_size > 10_000


def test_cli_bad_input_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("time,value\n0,x\n")
    assert main(["simulate", "--trace", str(bad), "--json"]) == 2
    assert "line 2" in capsys.readouterr().err


def test_demo_simulate_compares_every_policy_and_writes_the_plot(tmp_path, capsys, monkeypatch):
    # ten ANN/RF fits per run instead of a hundred: this test is about the comparison and
    # its plot, and the hundred MLP fits took most of its 50-110 s
    monkeypatch.setattr("elastic_sps.services.cli.simulation.MAX_FITS", 10)
    assert main(["demo", "--simulate", "--out", str(tmp_path), "--json"]) == 0
    docs = json.loads(capsys.readouterr().out)
    assert {d["policy"].split(":")[0] for d in docs} >= {"pa-sps", "static", "autoscale"}
    assert (tmp_path / "compare.png").stat().st_size > 0


def test_cli_simulate_takes_the_papers_limits(capsys):
    """static r = 1 on a spike trace far beyond its capacity, t_out 5 s, q_size 20,000:
    the JSON counts what expired and what was dropped, and nothing completes that was not
    entered."""
    args = ["simulate", "--trace", "short-spikes", "--policy", "static", "--replicas", "1"]
    limits = ["--peak-rate", "5000", "--t-out", "5", "--q-size", "20000", "--json"]
    assert main([*args, *limits]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["expired"] > 0 and doc["dropped"] > 0
    assert doc["processed_ratio"] < 0.5
    assert doc["latency_ms"] <= 5_000 + 1_000  # nothing older than t_out completes


def test_cli_rejects_a_non_positive_limit(capsys):
    assert main(["simulate", "--trace", "short-spikes", "--t-out", "0", "--json"]) == 2
    assert "--t-out must be > 0" in capsys.readouterr().err


def test_cli_event_mode_and_shedding(capsys):
    """--mode event says so and reports its speed; --shed goal with a goal counts what it
    shed; --shed without a goal is a clear error."""
    args = ["simulate", "--trace", "short-spikes", "--policy", "pa-sps:lr", "--json"]
    assert main([*args, "--mode", "event", "--et-cv2", "0.5"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mode"] == "event" and doc["events_per_s"] > 0 and doc["shed"] == 0.0
    overload = ["--peak-rate", "8000", "--latency-goal-ms", "250", "--shed", "goal"]
    assert main([*args, *overload]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mode"] == "fluid" and doc["shed"] > 0
    assert main([*args, "--shed", "goal"]) == 2
    assert "--shed needs --latency-goal-ms" in capsys.readouterr().err


class _Recording:
    """static:1 that keeps the queue levels the plan was given."""

    name = "recording"

    def __init__(self, topo):
        self.inner = make_policy("static:1", topo)
        self.levels: list[float] = []

    def initial_replicas(self):
        return self.inner.initial_replicas()

    def analyze(self, stats):
        self.levels.append(stats.operators["op"].queued)
        return self.inner.analyze(stats)


def test_the_plan_reads_the_levels_a_live_monitor_samples():
    from elastic_sps.model.engine import EngineModel

    topo = topology.from_dict(
        {"operators": [{"name": "op", "et_ms": 10, "max_replicas": 1}],
         "edges": [{"from": "source", "to": "op"}]}
    )  # fmt: skip
    arrivals = np.full(5, 50.0)
    # 50 events an interval on one replica of 100/s: rho 0.5, Sakasegawa's wait for one
    # server 0.5 / 0.5 x 1/2 x 10 ms = 5 ms; each event held 10 + 40 (hop) + 5 ms, so a
    # steady flow of 50/s holds 50 x 0.055 = 2.75 on the operator's input
    for in_flight, level in ((False, 0.0), (True, 2.75)):
        policy = _Recording(topo)
        engine = EngineModel(hop_s=0.04, levels_in_flight=in_flight)
        res = simulate(topo, arrivals, policy, 1.0, engine=engine)
        assert policy.levels[2:] == pytest.approx([level] * 3)
        assert res.series.queued[2:5] == pytest.approx([0.0] * 3)  # the backlog itself
