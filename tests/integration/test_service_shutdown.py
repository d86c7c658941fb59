"""A service exits within seconds of SIGTERM even when its broker is gone (compose's
`docker stop` and `elastic-sps up` expect it), and right away when the broker is there."""

from __future__ import annotations

import signal
import time

import pytest

from elastic_sps.io import embedded
from elastic_sps.services.runtime import SHUTDOWN_GRACE_S
from tests.support.processes import ServiceProcess
from tests.support.service_env import service_env

pytestmark = pytest.mark.integration


def _exit_time(proc: ServiceProcess, deadline_s: float) -> float:
    t0 = time.monotonic()
    assert proc.proc is not None
    proc.proc.send_signal(signal.SIGTERM)
    try:
        proc.proc.wait(deadline_s)
    except Exception:
        proc.stop(signal.SIGKILL)
        raise AssertionError(f"{proc.name} still running {deadline_s} s after SIGTERM") from None
    took = time.monotonic() - t0
    print(proc.name, "exited", round(took, 1), "s after SIGTERM")
    return took


def _start(name: str, bootstrap: str, redis_url: str) -> ServiceProcess:
    """``name`` started healthy, on its own key prefix and topics: on the session's
    broker it reads nothing another test left."""
    _, _, env = service_env(bootstrap, redis_url, tag_prefix="sd")
    svc = ServiceProcess(name, env).start()
    svc.wait_healthy(120)
    return svc


@pytest.mark.parametrize("name", ["monitor", "execute"])
@pytest.mark.parametrize("broker_gone", [False, True])
def test_a_service_exits_soon_after_sigterm(request, redis_url, broker_gone, name):
    if not broker_gone:
        # the session's broker (one that stays is all this case needs: no JVM of its own)
        svc = _start(name, request.getfixturevalue("kafka_bootstrap"), redis_url)
        # the README's promise: gone within the watchdog's 5 s of SIGTERM (+1 s for
        # the watchdog's own exit and the reaping, not for a slower shutdown)
        assert _exit_time(svc, 30) < SHUTDOWN_GRACE_S + 1
        return
    with embedded.kafka_broker() as bootstrap:
        svc = _start(name, bootstrap, redis_url)
    # the broker's context has ended: it is gone. Apache Kafka shuts down in a controlled
    # way (its group coordinator leaves first), and a faust service may already have
    # stopped on that by itself (its supervisor restarts it): then nothing can hang.
    if not svc.alive():
        print(name, "stopped with the broker:", svc.log.read_text()[-500:])
        return
    assert _exit_time(svc, 30) < SHUTDOWN_GRACE_S + 1
