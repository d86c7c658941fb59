"""Which dataplane process runs the queries: the holder of a Redis key set with a TTL
and renewed by its holder. A second dataplane process (a warm standby: its topology,
operators and Spark session ready) waits for the key to lapse, which it does when the
holder dies, and takes it; a holder that finds the key another's exits at once, so two
drivers never run one checkpoint (one that finds it lapsed and untaken takes it back).
A renewal that cannot reach Redis is not a loss: the holder keeps running and renews
when Redis answers."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

log = logging.getLogger("sps.dataplane")

# renew while the key is still ours, take it back if it lapsed with nobody taking it;
# 1: renewed, 2: taken back, 0: someone else's
_RENEW = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 2
end
return 0
"""


_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


VACANT_AFTER_HOLDER_S = 1.0  # a lapsed key seen this long unclaimed: nobody takes over


class Lease:
    def __init__(self, redis: Any, key: str, ttl_s: float) -> None:
        self.redis, self.key, self.ttl_ms = redis, key, max(1, int(ttl_s * 1000))
        self.me = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.held = False
        self._released = threading.Event()
        self._renew = redis.register_script(_RENEW)

    def try_acquire(self) -> bool:
        if not self.held:
            self.held = bool(self.redis.set(self.key, self.me, nx=True, px=self.ttl_ms))
        return self.held

    def acquire(self, poll_s: float = 0.2) -> None:
        """Block until this process holds the lease."""
        waited = False
        while not self._attempt():
            if not waited:
                log.info("standing by: another dataplane process holds %s", self.key)
                waited = True
            time.sleep(poll_s)
        if waited:
            log.warning("taking over: the lease %s lapsed", self.key)

    def _attempt(self) -> bool:
        try:
            return self.try_acquire()
        except Exception as exc:  # Redis away: stand by until it answers
            log.warning("lease %s: %s", self.key, exc)
            return False

    def serving(self, key: str) -> bool:
        """This holder's queries finished a batch: a standby may boot now. False: Redis
        did not answer (not a loss: said again later)."""
        try:
            self.redis.set(key, self.me)
        except Exception as exc:  # Redis away: the caller says it again
            log.warning("lease %s: serving not recorded: %s", self.key, exc)
            return False
        return True

    def wait_until_holder_serves(self, key: str, timeout_s: float, poll_s: float = 0.25) -> float:
        """Up to ``timeout_s``, wait while another process holds the lease and has not
        both said it serves (``key``, after its queries' first batch) and renewed since
        (a killed holder's key outlives it by up to a lease), so a restarted process's
        boot does not take the CPU from a new holder's first batch. Ends too when nobody
        holds the lease
        for a poll (a first start, where the processes race for it), or for
        ``VACANT_AFTER_HOLDER_S`` after a holder (nobody took over). Seconds waited."""
        began = time.monotonic()
        last_ttl, vacant_since, seen = None, None, False
        while time.monotonic() - began < timeout_s:
            try:
                holder, serving, ttl = self._holder(key)
            except Exception as exc:  # Redis away: boot, the lease waits for it anyway
                log.warning("lease %s: %s", self.key, exc)
                break
            now = time.monotonic()
            if holder is None:
                vacant_since = now if vacant_since is None else vacant_since
                # after a holder: a takeover may be under way (a standby polls 5 times a
                # second, slower on a loaded machine); before any: a first start
                if now - vacant_since >= (VACANT_AFTER_HOLDER_S if seen else poll_s):
                    break
            else:
                seen, vacant_since = True, None
                if holder == serving and last_ttl is not None and ttl > last_ttl:
                    break
            last_ttl = ttl if holder is not None else None
            time.sleep(poll_s)
        return time.monotonic() - began

    def _holder(self, key: str) -> tuple[Any, Any, int]:
        pipe = self.redis.pipeline(transaction=True)  # one moment: a new key is no renewal
        pipe.get(self.key)
        pipe.get(key)
        pipe.pttl(self.key)
        holder, serving, ttl = pipe.execute()
        return holder, serving, int(ttl)

    def renew(self) -> bool | None:
        """True: renewed (or, lapsed with no other process taking it, taken back: a
        renewal late on a loaded machine; nobody else ran the queries meanwhile);
        False: lost (another process holds it); None: Redis did not answer."""
        try:
            answer = int(self._renew(keys=[self.key], args=[self.me, self.ttl_ms]))
        except Exception as exc:  # Redis away: not a loss
            log.warning("lease %s not renewed: %s", self.key, exc)
            return None
        if answer == 2:
            log.warning("lease %s lapsed before its renewal; nobody took it: taken back", self.key)
        return answer != 0

    def release(self) -> None:
        """A clean stop hands over at once: the key goes if it is still ours."""
        self._released.set()  # the renewal stops first: a deleted key is no loss
        if self.held:
            try:
                self.redis.eval(_RELEASE, 1, self.key, self.me)
            except Exception as exc:  # Redis away: the key lapses on its own
                log.warning("lease %s not released: %s", self.key, exc)
        self.held = False

    def keep(self, on_lost: Callable[[], None]) -> threading.Thread:
        """Renew every third of the TTL in a daemon thread; ``on_lost`` when lost."""

        def loop() -> None:
            while not self._released.wait(self.ttl_ms / 3000):
                if self.renew() is False:
                    self.held = False
                    on_lost()
                    return

        thread = threading.Thread(target=loop, name="dataplane-lease", daemon=True)
        thread.start()
        return thread


def lost() -> None:
    """The queries' checkpoints are another process's now: stop this one at once, its
    Spark JVM with it (no graceful stop could beat the new holder's first batch)."""
    log.error("dataplane lease lost: another process runs the queries; exiting")
    logging.shutdown()
    os._exit(3)
