"""The comparisons' broker warm-up (``benchmarks.harness.broker.warm_broker``) on a real
broker: it moves records through produce and fetch; the broker's
process is found by its port when it runs here."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.harness.broker import broker_pid, jit_seconds, warm_broker
from tests.support import servers

pytestmark = pytest.mark.integration


def test_the_warm_up_moves_records_through_the_broker(kafka_bootstrap):
    done = warm_broker(kafka_bootstrap, max_s=2.0, step_s=1.0, rate=200.0)
    assert done.records >= 200  # at least one step's records produced
    assert done.seconds >= 1.0  # at least one whole step


def test_the_broker_is_found_by_its_port_or_not_at_all(kafka_bootstrap):
    pid = broker_pid(kafka_bootstrap)
    assert broker_pid("127.0.0.1:1") is None  # no listener there (port 1 is not 17409's)
    if servers.mode() == "containers":  # a broker in a container: not taken for a local one
        assert pid is None and jit_seconds(pid) is None
        return
    assert pid is not None, "the embedded broker's process"
    assert b"kafka.Kafka" in Path(f"/proc/{pid}/cmdline").read_bytes()
    jit = jit_seconds(pid)
    assert jit is None or jit > 0  # None only without jcmd; a running broker has compiled
