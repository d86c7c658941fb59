"""The embedded ensemble's supervisor: restart with backoff, give up on a crash loop."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from elastic_sps.services.ensemble.supervisor import (
    CRASH_WINDOW_S,
    MAX_CRASHES,
    Child,
    Ensemble,
    GaveUp,
)

pytestmark = pytest.mark.unit


class CrashingEnsemble(Ensemble):
    """Every (re)start is a process that exits at once with status 3."""

    def _spawn(self, name: str, port: int | None, log_path: Path) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(["sh", "-c", "exit 3"], start_new_session=True)
        proc.wait()
        return proc


def _ensemble(tmp_path: Path) -> tuple[CrashingEnsemble, Child]:
    ens = CrashingEnsemble("broker", "redis://x", tmp_path, {})
    child = ens.start("monitor")
    return ens, child


def test_a_crashed_service_is_restarted_after_a_growing_backoff(tmp_path):
    ens, child = _ensemble(tmp_path)
    ens.supervise_once(now=100.0)  # crash 1 seen: restart in 1 s
    assert child.restart_at == 101.0 and ens.restarts == {}
    ens.supervise_once(now=100.5)
    assert ens.restarts == {}  # not yet
    ens.supervise_once(now=101.0)
    assert ens.restarts == {"monitor": 1} and child.restart_at is None
    ens.supervise_once(now=102.0)  # crash 2: 2 s
    assert child.restart_at == 104.0


def test_a_crash_loop_is_given_up_naming_the_service_and_its_log(tmp_path):
    ens, _ = _ensemble(tmp_path)
    now = 0.0
    with pytest.raises(GaveUp, match=r"monitor crashed 5 times .*monitor\.log"):
        for _ in range(10 * MAX_CRASHES):
            ens.supervise_once(now=now)
            now += 1.0  # each restart is due within the backoff cap
    assert ens.failed is not None
    assert ens.restarts["monitor"] == MAX_CRASHES - 1


def test_crashes_spread_beyond_the_window_are_restarted_forever(tmp_path):
    ens, _ = _ensemble(tmp_path)
    now = 0.0
    for _ in range(3 * MAX_CRASHES):
        ens.supervise_once(now=now)  # the crash is seen
        ens.supervise_once(now=now + 20.0)  # the restart is due (backoff ≤ 15 s)
        now += CRASH_WINDOW_S / 2
    assert ens.failed is None and ens.restarts["monitor"] == 3 * MAX_CRASHES


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_unwind_up_as_ctrl_c_does(sig):
    from elastic_sps.services.ensemble.supervisor import Stopped, _stop_on_signals

    unwound = []
    before = signal.getsignal(sig)
    with pytest.raises(Stopped) as stop, _stop_on_signals():
        try:
            os.kill(os.getpid(), sig)
            time.sleep(5)  # the handler raises before this ends
        finally:
            unwound.append(True)
    assert stop.value.code == 128 + sig and unwound == [True]
    assert signal.getsignal(sig) == before  # the old handler is back


def test_ctrl_c_unwinds_up_even_when_the_shell_ignored_sigint():
    from elastic_sps.services.ensemble.supervisor import _stop_on_signals

    before = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a background job's inheritance
    try:
        unwound = []
        with pytest.raises(KeyboardInterrupt), _stop_on_signals():
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)  # the handler raises before this ends
            finally:
                unwound.append(True)
        assert unwound == [True] and signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


def test_up_goes_on_with_the_run_folders_deployment_of_the_same_pipeline(tmp_path):
    from elastic_sps.services.ensemble.supervisor import deployment_prefix

    first, resumed = deployment_prefix(tmp_path, "orders")
    assert first.startswith("run") and not resumed
    assert deployment_prefix(tmp_path, "orders") == (first, True)
    # another pipeline in the folder: a new deployment, which the folder then goes on with
    other, resumed = deployment_prefix(tmp_path, "clicks")
    assert other != first and not resumed
    assert deployment_prefix(tmp_path, "clicks") == (other, True)
    assert deployment_prefix(tmp_path, "clicks", fresh=True)[1] is False


def test_each_deployment_keeps_its_own_spark_checkpoint(tmp_path):
    """A new deployment in a used run folder must not take the last one's Spark offsets
    (it skipped what its Redis never saw); the default prefix's stays where it was."""
    from elastic_sps.services.dataplane.job import checkpoint_path
    from elastic_sps.settings import DataplaneSettings

    ckpt = str(tmp_path / "checkpoints")
    ours = DataplaneSettings(checkpoint_dir=ckpt, key_prefix="run2")
    assert checkpoint_path(ours, "ops@entry") == tmp_path / "checkpoints" / "run2" / "ops@entry"
    compose = DataplaneSettings(checkpoint_dir=ckpt)
    assert checkpoint_path(compose, "ops") == tmp_path / "checkpoints" / "ops"
