"""The watermark protocol's pure parts, hand-checked: a partition's valve over its
inputs' declarations, and a source reader's clock that declares idle only at the end."""

from __future__ import annotations

import pytest

from elastic_sps.io.watermarks import (
    Declaration,
    SourceClock,
    Valve,
    decode_declaration,
    is_declaration,
)

pytestmark = pytest.mark.unit


def _d(src: str, part: int, wm: float | None, idle: bool = False, of: int = 2) -> Declaration:
    return Declaration(src, part, of, wm, idle)


def test_a_declaration_round_trips_and_is_told_from_an_event():
    d = _d("bids", 1, 12.5, idle=True, of=4)
    assert is_declaration(d.encode()) and decode_declaration(d.encode()) == d
    assert not is_declaration(b'{"id":"e1","ts":1.0,"src":"source","payload":{}}')
    assert not is_declaration(None)


def test_the_least_active_input_holds_and_every_sender_is_expected():
    v = Valve({"a": 2, "b": 1})
    assert not v.declare(_d("a", 0, 30)) and v.current is None
    assert not v.declare(_d("a", 1, 20)) and v.current is None  # b/0 not heard from
    assert v.declare(_d("b", 0, 25, of=1)) and v.current == 20
    assert v.declare(_d("a", 1, 40)) and v.current == 25


def test_an_idle_input_holds_nothing_and_all_idle_is_the_greatest():
    v = Valve({"a": 2})
    v.declare(_d("a", 0, 50))
    v.declare(_d("a", 1, 10, idle=True))
    assert v.current == 50 and not v.idle
    v.declare(_d("a", 0, 50, idle=True))
    assert v.current == 50 and v.idle
    # back from idle below the partition's watermark: it never goes back
    v.declare(_d("a", 1, 12))
    assert v.current == 50 and not v.idle


def test_an_inputs_own_watermark_never_goes_back():
    v = Valve({"a": 1})
    v.declare(_d("a", 0, 30, of=1))
    v.declare(_d("a", 0, 20, of=1))  # a retry's older declaration
    assert v.marks["a/0"].wm == 30 and v.current == 30


def test_the_source_count_is_learnt_from_its_readers():
    """Three source partitions: the watermark waits for all three."""
    v = Valve({"source": None})
    v.declare(_d("source", 0, 5, of=3))
    v.declare(_d("source", 1, 7, of=3))
    assert v.current is None
    v.declare(_d("source", 2, 6, of=3))
    assert v.current == 5


def test_a_reader_is_idle_only_after_sitting_at_the_end_for_idle_s():
    c = SourceClock(idle_s=5.0)
    c.read(41.0)
    c.position(at_end=False, now=100.0)  # behind: never idle, however long
    assert not c.idle(now=200.0)
    c.position(at_end=True, now=200.0)
    assert not c.idle(now=204.9) and c.idle(now=205.0)
    c.read(45.0)  # read again: the clock starts over
    assert not c.idle(now=300.0) and c.wm == 45.0
