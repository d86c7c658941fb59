"""The harnesses behind headline figures: ``Foresight`` (the control bound), the
comparisons' CPU accounting by process (``benchmarks.harness.processes.cpu_seconds``) and
the broker's JIT seconds each row carries (``benchmarks.harness.broker``)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from benchmarks.bench_control import Foresight
from benchmarks.harness import runs
from benchmarks.harness.broker import parse_jit_seconds
from benchmarks.harness.processes import cpu_seconds

pytestmark = pytest.mark.unit


def test_foresight_forecasts_the_next_intervals_true_input():
    f = Foresight([5.0, 7.0, 9.0])
    assert f.predict() == 5.0  # nothing observed: interval 0's input
    f.observe(5.0)
    assert f.predict() == 7.0
    f.observe(7.0)
    assert f.predict() == 9.0
    f.observe(9.0)
    assert f.predict() == 9.0  # past the series: its last value


def test_cpu_seconds_counts_a_child_by_its_role():
    # the child burns 0.4 s of CPU time (not of wall time: the same on any machine), then
    # waits to be measured
    burn = (
        "import sys, time\n"
        "t = time.process_time()\n"
        "while time.process_time() - t < 0.4: pass\n"
        "print('burnt', flush=True)\n"
        "time.sleep(30)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", burn, "marker-role-x"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "burnt"
        time.sleep(0.1)
        roles = cpu_seconds((("marker-role-x", "burner"),))
        assert 0.35 <= roles["burner"] <= 1.5  # 0.4 s, at the kernel clock's tick
        assert "bench" in roles  # this process, apart
    finally:
        child.kill()
        child.wait()


def test_cpu_since_keeps_a_process_that_exited_between_the_snapshots():
    # the child starts a grandchild that burns 0.4 s of CPU and exits (reaped) between the
    # two snapshots, as a Spark Python worker may: its CPU stays with the child's role
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass\n"
    parent = (
        "import subprocess, sys, time\n"
        "print('ready', flush=True)\n"
        "sys.stdin.readline()\n"
        f"subprocess.run([sys.executable, '-c', {burn!r}])\n"
        "print('done', flush=True)\n"
        "time.sleep(30)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", parent, "marker-role-y"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    roles = (("marker-role-y", "parent"),)
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "ready"
        before = cpu_seconds(roles)
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "done"
        spent = {k: v - before.get(k, 0.0) for k, v in cpu_seconds(roles).items()}
        assert 0.35 <= spent["parent"] <= 1.5
    finally:
        child.kill()
        child.wait()


def test_rescales_summary_shares_ds2s_rescales_and_places_each_on_its_frontier():
    from benchmarks.bench_control import rescales_summary

    def row(policy: str, saved: float, latency: float, per_day: float) -> dict[str, object]:
        return {
            "policy": policy,
            "saved_resources": saved,
            "latency_ms": latency,
            "per_day": per_day,
        }

    # DS2's frontier: (0.5, 10 ms), (0.7, 20 ms); at 0.6 saved it gives 15 ms
    rows = [
        row("ds2@0.5", 0.5, 10.0, 300.0),
        row("ds2@0.7", 0.7, 20.0, 200.0),
        row("ds2@0.9", 0.6, 30.0, 100.0),  # beaten by ds2@0.7
        row("pa-sps:basic@0.7+calm", 0.8, 40.0, 150.0),  # saves more than DS2 ever does
        row("pa-sps:basic@0.7+steady", 0.6, 16.0, 100.0),  # above: 16 > 15 ms
        row("pa-sps:basic@0.7+patient", 0.6, 15.0, 40.0),
    ]
    out = rescales_summary(rows)["candidates"]
    assert out["pa-sps:basic@0.7+calm"] == {
        "share_of_ds2": 0.75,
        "at_most_half": False,
        "on_or_below_ds2": True,
    }
    assert out["pa-sps:basic@0.7+steady"] == {
        "share_of_ds2": 0.5,
        "at_most_half": True,
        "on_or_below_ds2": False,
    }
    assert out["pa-sps:basic@0.7+patient"] == {
        "share_of_ds2": 0.2,
        "at_most_half": True,
        "on_or_below_ds2": True,
    }


# ``jcmd <pid> PerfCounter.print`` as Java 17 prints it (other counters cut)
PERF_COUNTERS = """\
java.ci.totalTime=24671624989
java.cls.loadedBytes=7433728
sun.ci.lastMethod="kafka/server/ReplicaManager fetchMessages"
sun.os.hrt.frequency=1000000000
"""


def test_the_brokers_jit_seconds_come_from_its_compile_ticks_over_their_frequency():
    assert parse_jit_seconds(PERF_COUNTERS) == pytest.approx(24.671624989)
    assert parse_jit_seconds(PERF_COUNTERS.replace("1000000000", "2000000000")) == (
        pytest.approx(12.3358124945)
    )


def test_no_jit_seconds_without_both_counters():
    assert parse_jit_seconds("sun.os.hrt.frequency=1000000000\n") is None
    assert parse_jit_seconds("java.ci.totalTime=5\n") is None
    assert parse_jit_seconds("") is None


def test_run_all_gives_each_row_the_brokers_jit_seconds_over_that_run(monkeypatch):
    readings = iter([10.0, 12.5, 12.5, 13.0])  # before and after each of two runs
    monkeypatch.setattr(runs, "jit_seconds", lambda pid: next(readings))
    rows = runs.run_all(lambda peer, case: {"peer": peer}, ["a", "b"], [{}], 1, True, 4242)
    assert [(r["peer"], r["broker_jit_s"]) for r in rows] == [("a", 2.5), ("b", 0.5)]


def test_run_all_leaves_the_jit_out_when_it_cannot_be_read():
    rows = runs.run_all(lambda peer, case: {"peer": peer}, ["a"], [{}], 1, True, None)
    assert "broker_jit_s" not in rows[0]


def test_warm_runs_measure_every_peer_first_and_leave_their_rows_out():
    calls: list[str] = []

    def measure(peer: str, case: dict) -> dict:
        calls.append(peer)
        return {"peer": peer}

    rows = runs.run_all(measure, ["a", "b"], [{}], 1, True, None, warm_runs=1)
    assert calls == ["a", "b", "b", "a"]  # the warm round, then the measured one reversed
    assert [(r["peer"], r["run"]) for r in rows] == [("b", 0), ("a", 0)]
