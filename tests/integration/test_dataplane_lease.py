"""The dataplane lease against a real redis-server: one holder at a time, a standby
takes over once the holder's lease lapses, a holder that lost it is told so."""

from __future__ import annotations

import threading
import time

import pytest

from elastic_sps.services.dataplane.lease import Lease

pytestmark = pytest.mark.integration


def test_one_holder_at_a_time(redis_client):
    first, second = Lease(redis_client, "t:lease", 5.0), Lease(redis_client, "t:lease", 5.0)
    assert first.try_acquire()
    assert not second.try_acquire()
    assert first.renew() is True
    assert second.renew() is False  # not its own


def test_a_standby_takes_over_when_the_holder_stops_renewing(redis_client):
    holder, standby = Lease(redis_client, "t:lease", 0.3), Lease(redis_client, "t:lease", 0.3)
    assert holder.try_acquire()
    standby.acquire(poll_s=0.05)  # returns once the holder's 0.3 s have lapsed
    assert standby.held
    assert holder.renew() is False  # the old holder learns it lost the lease


def test_a_late_renewal_takes_a_lapsed_untaken_lease_back(redis_client):
    # a loaded machine delays the renewal past the lease: nobody else took it, so nobody
    # else runs the queries, and the holder goes on (it exited: a run lost its dataplane)
    holder = Lease(redis_client, "t:lease", 0.2)
    assert holder.try_acquire()
    time.sleep(0.4)
    assert redis_client.get("t:lease") is None
    assert holder.renew() is True
    assert redis_client.get("t:lease").decode() == holder.me


def test_a_clean_stop_hands_over_at_once(redis_client):
    holder, standby = Lease(redis_client, "t:lease", 60.0), Lease(redis_client, "t:lease", 60.0)
    assert holder.try_acquire()
    holder.release()
    assert standby.try_acquire()  # no 60 s wait
    holder.release()  # not its own any more: the standby keeps it
    assert standby.renew() is True


def test_a_lost_lease_calls_on_lost(redis_client):
    holder = Lease(redis_client, "t:lease", 0.3)
    assert holder.try_acquire()
    calls: list[float] = []
    thread = holder.keep(lambda: calls.append(time.monotonic()))
    redis_client.set("t:lease", "someone else")
    thread.join(timeout=5)
    assert len(calls) == 1 and not holder.held


def test_a_released_lease_is_not_reported_lost(redis_client):
    holder = Lease(redis_client, "t:lease", 0.3)
    assert holder.try_acquire()
    calls: list[float] = []
    thread = holder.keep(lambda: calls.append(time.monotonic()))
    holder.release()
    thread.join(timeout=5)
    assert not thread.is_alive() and calls == []


def test_a_process_finding_a_holder_boots_once_the_holder_serves(redis_client):
    holder, restarted = Lease(redis_client, "t:lease", 0.6), Lease(redis_client, "t:lease", 0.6)
    # nobody holds the lease (a first start): vacant for one poll, no more
    assert restarted.wait_until_holder_serves("t:serving", 30.0, poll_s=0.05) < 30.0
    assert holder.try_acquire()
    holder.keep(lambda: None)  # alive: renews every 0.2 s
    timer = threading.Timer(0.3, holder.serving, args=("t:serving",))
    timer.start()
    waited = restarted.wait_until_holder_serves("t:serving", 30.0, poll_s=0.05)
    assert 0.3 <= waited < 30.0 and redis_client.get("t:serving") == holder.me.encode()
    holder.release()


def test_a_killed_holder_that_served_is_waited_out(redis_client):
    """Its key outlives it by up to a lease and says it served, but is never renewed:
    the wait lasts until the key lapses, so the standby's takeover comes first."""
    dead, restarted = Lease(redis_client, "t:lease", 2.0), Lease(redis_client, "t:lease", 2.0)
    assert dead.try_acquire()
    dead.serving("t:serving")
    assert 1.0 <= restarted.wait_until_holder_serves("t:serving", 30.0, poll_s=0.05) < 30.0


def test_the_boot_wait_ends_at_its_timeout(redis_client):
    stuck, restarted = Lease(redis_client, "t:lease", 60.0), Lease(redis_client, "t:lease", 60.0)
    assert stuck.try_acquire()  # holds, never serves
    assert restarted.wait_until_holder_serves("t:serving", 0.2, poll_s=0.05) >= 0.2


class _Query:
    """What /health asks of a running Spark query: whether it is active, its last
    batch's progress (None: no batch finished yet) and its status (data waiting, a
    batch being planned or run)."""

    name, isActive = "op_ops", True

    def __init__(self, progress: dict | None, data: bool = True, trigger: bool = True) -> None:
        self.lastProgress = progress
        self.status = {"isDataAvailable": data, "isTriggerActive": trigger}


def test_health_waits_for_this_process_s_tasks_to_serve(redis_client):
    from elastic_sps.io.knowledge_base import Keys
    from elastic_sps.services.dataplane.observe import health, serving

    keys, me = Keys("t"), Lease(redis_client, "t:lease", 5.0).me

    def ok(query: _Query) -> tuple[bool, bool]:
        good, body = health(
            redis_client, lambda: [query], lambda: serving(redis_client, keys, me, [query])
        )
        return good, body["serving"]

    # the warm-up batch not finished: not healthy
    assert ok(_Query(None))[0] is False
    # finished, data waiting, the next batch planned, no task past the warm-up serves yet
    assert ok(_Query({"batchId": 0})) == (False, False)
    # another process's tasks (a holder before this one) do not count
    redis_client.sadd(keys.tasks_serving, "host:1:old")
    assert ok(_Query({"batchId": 0})) == (False, False)
    # nothing to read: Spark plans no batch until data comes, and the pipeline serves
    assert ok(_Query({"batchId": 0}, data=False, trigger=False)) == (True, True)
    # a task of this process serves
    redis_client.sadd(keys.tasks_serving, me)
    assert ok(_Query({"batchId": 0})) == (True, True)
    # the old holder's task starting late does not take this process's mark away
    redis_client.sadd(keys.tasks_serving, "host:1:old")
    assert ok(_Query({"batchId": 0})) == (True, True)
