"""The per-event path's shortcuts keep their promises: a slot's successes folded into the
failure guard at once judge as one at a time; a key extracted at prefetch is the one the
engine applies; the producer's per-partition reports give the same ends and failures as a
callback per record."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from confluent_kafka import KafkaError

from elastic_sps.io.knowledge_base import Keys
from elastic_sps.io.tracked_producer import Handed, Mark, TrackedProducer
from elastic_sps.model import topology
from elastic_sps.pipeline.chain import open_runnable
from elastic_sps.pipeline.engine import Event, OperatorCore
from elastic_sps.pipeline.failures import Failure, FailureGuard, OperatorFailing
from elastic_sps.pipeline.local_store import MemoryStore
from elastic_sps.pipeline.operators import Context
from elastic_sps.pipeline.stateful import NoKey, key_or_none

pytestmark = pytest.mark.unit

FAILURE = Failure("KeyError", "'text'", "")
TOPO = topology.from_dict(
    {
        "operators": [
            {
                "name": "total",
                "et_ms": 1,
                "key": "field:key",
                "code": "tests.support.engine_ops:sum_values",
            },
            {"name": "win", "et_ms": 1, "key": "field:k", "window": {"tumbling_s": 10}},
        ],
        "edges": [{"from": "source", "to": "total"}, {"from": "source", "to": "win"}],
    }
)


def test_successes_folded_at_once_judge_as_one_at_a_time() -> None:
    """Window 10, share 0.5: 3 ok, 5 failures (window not full: not judged), 2 ok folded
    at once: 5 of 10 failed, still bad input; the next failure pushes out an ok: 6 of 10."""
    guard = FailureGuard("parse", "dead-letter", max_share=0.5, window=10)
    guard.ok(3)
    for _ in range(5):
        guard.failed(FAILURE)
    guard.ok(2)
    with pytest.raises(OperatorFailing, match="failed on 6 of its last 10 events"):
        guard.failed(FAILURE)


def test_a_window_of_successes_clears_the_failures() -> None:
    """ok(10) fills the window with successes: 5 failures after it are 5 of 10, the 6th
    is 6 of 10."""
    guard = FailureGuard("parse", "dead-letter", max_share=0.5, window=10)
    for _ in range(4):
        guard.failed(FAILURE)
    guard.ok(25)
    for _ in range(5):
        guard.failed(FAILURE)
    with pytest.raises(OperatorFailing, match="failed on 6 of its last 10 events"):
        guard.failed(FAILURE)


def _core(name: str) -> OperatorCore:
    return OperatorCore(TOPO, name, open_runnable(TOPO, name, Context(name)))


def test_the_engine_applies_the_key_the_event_carries() -> None:
    """The key extracted at prefetch is not extracted again: the event's state is the
    carried key's (a payload whose key path is empty would raise NoKey otherwise)."""
    core, store, ctx = _core("total"), MemoryStore(), Context("total")
    assert key_or_none(TOPO["total"], {"value": 1}) is None
    assert key_or_none(TOPO["total"], {"key": "a", "value": 1}) == "a"
    with pytest.raises(NoKey):
        core.apply(Event("e0", {"key": None, "value": 4}, 1.0), ctx, store, [])
    out = core.apply(Event("e1", {"key": "a", "value": 4}, 1.0, key="a"), ctx, store, [])
    assert out == [(None, "e1", {"key": "a", "sum": 4})]
    out = core.apply(Event("e2", {"key": "a", "value": 3}, 2.0), ctx, store, [])
    assert out == [(None, "e2", {"key": "a", "sum": 7})]  # extracted here: the same key


def test_a_window_event_goes_to_its_carried_keys_window() -> None:
    core, store, ctx = _core("win"), MemoryStore(), Context("win")
    core.apply(Event("e1", {"x": 1}, 3.0, key="b"), ctx, store, [])
    core.apply(Event("e2", {"k": "b"}, 4.0), ctx, store, [])
    values = store._values.items()
    assert [(f, v) for (kind, _, f), v in values if kind == "w"] == [('["b",0]', 2)]


class _Redis:
    def __init__(self) -> None:
        self.raised: list[tuple[list[str], list[int]]] = []

    def register_script(self, _: str) -> Any:
        return lambda keys, args: self.raised.append((keys, args))


class _Msg:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def offset(self) -> int:
        return self._offset


def test_the_last_report_of_each_partition_gives_its_end() -> None:
    """Offsets 4 and 9 delivered to t[1], 0 to t[2]: ends 10 and 1; a failed record
    fails the flush once, and the next flush starts clean."""
    r = _Redis()
    p = TrackedProducer("127.0.0.1:1", r, Keys("lean"))
    p._sink("t", 1)(None, _Msg(4))
    p._sink("t", 1)(None, _Msg(9))
    p._sink("t", 2)(None, _Msg(0))
    p.flush(1)
    assert r.raised == [([Keys("lean").ends("t")], [1, 10, 2, 1])]
    p._sink("t", 1)(KafkaError(KafkaError._MSG_TIMED_OUT), _Msg(-1))
    with pytest.raises(RuntimeError, match="1 records failed delivery"):
        p.flush(1)
    p._sink("t", 2)(None, _Msg(1))
    p.flush(1)
    assert r.raised[-1] == ([Keys("lean").ends("t")], [2, 2])


def test_a_failed_delivery_fails_each_threads_next_flush_once() -> None:
    """Threads a and b share the worker's producer; a failure reported while both had
    records out fails b's flush and a's (b's flush collected it, a's output is as much
    in doubt); a's next flush is clean, and thread c, which began after it, never sees
    it."""
    from concurrent.futures import ThreadPoolExecutor

    p = TrackedProducer("127.0.0.1:1", _Redis(), Keys("lean"))
    a, b, c = (ThreadPoolExecutor(max_workers=1) for _ in range(3))

    def flush() -> str:
        try:
            p.flush(1)
        except RuntimeError as exc:
            return str(exc)
        return "ok"

    a.submit(p.send).result()  # a's records out
    b.submit(p.send).result()
    p._sink("t", 1)(KafkaError(KafkaError._MSG_TIMED_OUT), _Msg(-1))
    assert b.submit(flush).result() == "1 records failed delivery"
    assert a.submit(flush).result() == "1 records failed delivery"
    assert a.submit(flush).result() == "ok"
    assert c.submit(flush).result() == "ok"
    for pool in (a, b, c):
        pool.shutdown()


def test_a_flush_counts_a_failure_another_thread_is_still_collecting() -> None:
    """Thread ``other`` has taken a failed report off partition t[1]'s reports and is
    held before it counts it; a flush in that moment waits for the count and raises (a
    release or checkpoint must not commit past an output that was not delivered)."""
    p = TrackedProducer("127.0.0.1:1", _Redis(), Keys("lean"))
    p.send()  # this thread's records out: a failure after this is its own
    taken, go_on = threading.Event(), threading.Event()

    class HeldReports(dict):
        def pop(self, key: Any, default: Any = None) -> Any:
            value = super().pop(key, default)
            if key is not None and value is not None:
                taken.set()
                go_on.wait(5)
            return value

    p._last[("t", 1)] = HeldReports()
    p._sink("t", 1)(KafkaError(KafkaError._MSG_TIMED_OUT), _Msg(-1))
    other = threading.Thread(target=p._collect, name="other")
    other.start()
    assert taken.wait(5)
    threading.Timer(0.3, go_on.set).start()
    with pytest.raises(RuntimeError, match="1 records failed delivery"):
        p.flush(1)
    other.join(5)


def test_a_flush_until_a_mark_waits_for_that_threads_records_alone() -> None:
    """No broker answers: every record stays out until its 0.5 s delivery timeout fails
    it. A flush until thread a's mark, taken before a produced anything, returns at once
    although thread b's record is out; a's own records (one to a named partition, two
    by key) fail the flush until a's later mark once their reports come."""
    from concurrent.futures import ThreadPoolExecutor

    p = TrackedProducer("127.0.0.1:1", _Redis(), Keys("lean"), **{"message.timeout.ms": 500})
    a, b = ThreadPoolExecutor(max_workers=1), ThreadPoolExecutor(max_workers=1)
    before = a.submit(p.mark).result()
    b.submit(p.produce, "t", b"b's", 0).result()
    a.submit(p.flush, 0.1, None, before).result()  # b's record is not waited for
    with pytest.raises(RuntimeError, match="1 records failed delivery"):
        b.submit(p.flush, 10.0).result()
    since = p.failures  # b's counted: a answers for its own from here
    a.submit(p.stage, "t", b"x", 1).result()
    a.submit(p.stage, "t", b"y", None, b"k1").result()
    a.submit(p.stage, "t", b"z", None, b"k2").result()
    after = a.submit(p.mark).result()
    assert (after.named, after.calls) == ({("t", 1): 1}, 1)  # the two by key in one call
    with pytest.raises(RuntimeError, match="3 records failed delivery"):
        a.submit(p.flush, 10.0, since, after).result()
    for pool in (a, b):
        pool.shutdown()


def test_records_by_key_reported_after_the_mark_do_not_cover_those_before_it() -> None:
    """A call of 2 records by key, the mark, then a call of 3: the later call's reports
    (they may land on other partitions and come first) leave the mark's 2 records
    outstanding; the mark is reached only once those 2 are reported."""
    handed = Handed()
    handed.calls = handed.opened(2)
    mark = Mark(handed, {}, handed.calls)
    later = handed.opened(3)
    handed.calls = later
    for _ in range(3):
        handed.report_by_key(later)
    assert handed.left(mark) == 2
    handed.report_by_key(mark.calls)
    assert handed.left(mark) == 1
    handed.report_by_key(mark.calls)
    assert handed.left(mark) == 0
