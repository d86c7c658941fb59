"""A graceful stop of the dataplane, on SIGTERM to its driver process (what ``docker
stop`` sends a container's first process, and ``elastic-sps up`` the dataplane before
its process group): the tasks end their epochs at once, each flushing and committing
what it produced with its progress; the source plans no further batch; the queries stop
once the batch under way is done. The next start (or a standby taking over) goes on
from those commits, so nothing is produced twice. A stop that does not let the tasks
commit (SIGKILL, a SIGTERM to the whole process group, which reaches Spark's JVM at
once, or the grace running out) leaves delivery at least once, as for any failure.

The request reaches the tasks and the source the way a resize does: a Redis key (one
per lease holder, so a standby's tasks never read it) that they already ask about in
their existing round trips.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from elastic_sps.io.knowledge_base import Keys

log = logging.getLogger("sps.dataplane")


class StopRequest:
    """SIGTERM's handler. Once ``graceful`` (the lease held, the queries starting or
    serving), a request: ``requested`` turns True and the main loop ends the queries
    gracefully (``end_epochs``). Before that (starting, or a standby waiting for the
    lease) an exit at once with status 0 (nothing was produced); at a second SIGTERM an
    exit at once with 128 + the signal's number, as a process the signal killed (what
    its tasks produced since their last checkpoint is produced again on restart). A
    plain flag, polled: a handler must not take a lock (``Event.set`` does) that the
    main thread it interrupts may hold."""

    def __init__(self) -> None:
        self.requested = False
        self.graceful = False

    def __call__(self, signum: int, frame: Any) -> None:
        if not self.graceful:
            raise SystemExit(0)
        if self.requested:
            raise SystemExit(128 + signum)
        self.requested = True


def trigger_running(query: Any) -> bool:
    """Whether ``query`` is inside a trigger: planning or running a micro-batch (not if
    Spark's JVM no longer answers: nothing of it is left to wait for)."""
    from py4j.protocol import Py4JNetworkError

    try:
        return bool(query.isActive and query.status.get("isTriggerActive", False))
    except Py4JNetworkError:
        return False


def windows_serving(r: Any, keys: Keys, holder: str) -> bool:
    """Whether any of ``holder``'s tasks' windows still serve past their task
    (``overlap.py``): they too end at the stop request and commit."""
    from redis.exceptions import RedisError

    from elastic_sps.io.marks import text

    try:
        found = list(r.scan_iter(keys.overlaps, count=1000))
        marks = r.mget(found) if found else []
    except RedisError:
        return False
    return any(m is not None and text(m).split("|", 1)[0] == holder for m in marks)


def end_epochs(
    r: Any,
    keys: Keys,
    holder: str,
    queries: Sequence[Any],
    grace_s: float,
    poll_s: float = 0.1,
    overlaps: bool = False,
) -> bool:
    """Ask ``holder``'s tasks and source to end (``Keys.dataplane_stopping``), then wait up
    to ``grace_s`` until no query is inside a trigger and, with ``overlaps``, none of its
    windows serves past its task (``overlap``): seen after the ask, a query's batch under
    way has ended and committed, and any later trigger plans none. True if all got there
    in time."""
    from redis.exceptions import RedisError

    began = time.monotonic()
    try:
        # the key outlives the wait (a trigger planning as the queries stop still reads
        # it); it dies with its expiry, and no other holder reads it
        r.set(keys.dataplane_stopping(holder), "1", ex=max(1, int(grace_s) + 30))
    except RedisError as exc:  # the tasks cannot be asked: stopped as they are
        log.warning("stopping: the tasks not asked to end their epochs (%s)", exc)
        return False
    pending = list(queries)
    while pending:
        pending = [q for q in pending if trigger_running(q)]
        if not pending or time.monotonic() - began >= grace_s:
            break
        time.sleep(poll_s)
    while overlaps and not pending and windows_serving(r, keys, holder):
        if time.monotonic() - began >= grace_s:
            pending = ["a window past its task"]
            break
        time.sleep(poll_s)
    if pending:
        log.warning(
            "stopping: %d queries or windows still serving after %.0f s; stopping as they are",
            len(pending),
            grace_s,
        )
    else:
        log.info("stopping: every epoch ended and committed (%.1f s)", time.monotonic() - began)
    return not pending
