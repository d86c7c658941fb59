"""The dataplane lease against a real redis-server: one holder at a time, a standby
takes over once the holder's lease lapses, a holder that lost it is told so."""

from __future__ import annotations

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
