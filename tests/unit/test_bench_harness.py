"""The harnesses behind headline figures: ``Foresight`` (the control bound) and the peers'
CPU accounting by process (``bench_peers.cpu_seconds``)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from benchmarks.bench_control import Foresight
from benchmarks.bench_peers import cpu_seconds

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
