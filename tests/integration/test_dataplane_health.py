"""The dataplane's /health before its queries run, against a real redis-server: a process
restarted while another holds the lease waits for that holder's first batch and says so
("starting", so `up`'s watch gives it a boot's allowance instead of calling it silent);
a warm process not holding the lease stands by, healthy."""

from __future__ import annotations

import json
import signal
import time
import urllib.error
import urllib.request
from types import SimpleNamespace

import pytest

from elastic_sps.io.knowledge_base import Keys
from elastic_sps.model import topology
from elastic_sps.services.dataplane.observe import Observed
from tests.support.processes import ServiceProcess

pytestmark = pytest.mark.integration


def _health(port: int) -> tuple[int, dict] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    except OSError:
        return None


def test_a_dataplane_waiting_for_the_holder_answers_that_it_is_starting(redis_url, redis_client):
    """Another process holds the lease and never says it serves: the new process waits
    (up to `SPS_STANDBY_BOOT_WAIT_S`, 60 s here) before it boots, answering meanwhile."""
    keys = Keys("t-health")
    redis_client.set(keys.dataplane_lease, "another:1:abc", px=120_000)
    env = {
        "SPS_REDIS_URL": redis_url,
        "SPS_KEY_PREFIX": keys.prefix,
        "SPS_STANDBY_BOOT_WAIT_S": "60",
    }
    svc = ServiceProcess("dataplane", env).start()
    try:
        deadline, said = time.monotonic() + 45, None
        while said is None and time.monotonic() < deadline:
            assert svc.alive(), svc.log.read_text()[-2000:]
            said = _health(svc.port)
            time.sleep(0.2)
        assert said == (503, {"service": "dataplane", "status": "starting", "phase": "waiting"})
    finally:
        svc.stop(signal.SIGKILL)


def test_a_process_is_a_standby_once_warm_and_the_holders_health_once_it_holds(redis_client):
    lease = SimpleNamespace(key="t:dp:lease", me="me:1:aa", held=False)
    observed = Observed(redis_client, Keys("t"), lease, task_window_s=0.0)
    starting = {"service": "dataplane", "status": "starting"}
    assert observed.state() == (False, {**starting, "phase": "waiting"})
    observed.phase = "starting"
    redis_client.set(lease.key, "another:2:bb")
    assert observed.state() == (False, {**starting, "phase": "starting"})  # not warm yet
    queries: list[SimpleNamespace] = []
    observed.running(topology.load("twitter"), lambda: queries)
    assert observed.state() == (True, {"service": "dataplane", "status": "standby"})
    lease.held = True  # taken: its queries' health, starting until they run a batch
    ok, said = observed.state()
    assert not ok and said["status"] == "starting" and said["queries"] == {}
    queries.append(SimpleNamespace(name="q0", isActive=True, lastProgress=None, status={}))
    assert observed.state()[1]["status"] == "starting"
    queries[0].lastProgress = {"batchId": 0}  # past its first batch, idle: it serves
    assert observed.state()[0] is True and observed.state()[1]["status"] == "ok"
    queries[0].isActive = False  # stopped: degraded, said after the usual 10 s
    assert observed.state() == (
        False,
        {"service": "dataplane", "status": "degraded", "redis": True, "serving": True}
        | {"queries": {"q0": False}},
    )
