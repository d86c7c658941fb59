"""The open-window index by end (``by_end.ByEnd``), as the in-memory store uses it:
the oldest open window and the due ones, with ends that move or go."""

from __future__ import annotations

import pytest

from elastic_sps.pipeline.local_store import MemoryStore

pytestmark = pytest.mark.unit


def test_the_oldest_and_the_due_follow_ends_that_move_or_go() -> None:
    s = MemoryStore()
    assert s.oldest_end() is None and s.due(100.0) == []
    s.set_end(0, "a", 10.0)
    s.set_end(1, "b", 20.0)
    s.set_end(0, "c", 30.0)
    assert s.oldest_end() == 10.0
    s.set_end(0, "a", None)  # a closed without firing (merged away)
    assert s.oldest_end() == 20.0
    s.set_end(1, "b", 40.0)  # b's session grew past c
    s.set_end(1, "b", 40.0)  # the same end again: one entry
    assert s.oldest_end() == 30.0
    assert s.due(35.0) == [(0, "c", 30.0)]
    s.set_end(0, "c", None)  # the caller closes what it took
    assert s.due(35.0) == []
    s.set_end(2, "d", 40.0)
    assert s.due(40.0) == [(1, "b", 40.0), (2, "d", 40.0)]  # by end, then group, field
    s.set_end(1, "b", None)
    s.set_end(2, "d", None)
    assert s.oldest_end() is None


def test_a_window_reopened_at_its_old_end_is_due_once() -> None:
    s = MemoryStore()
    s.set_end(0, "w", 10.0)
    s.set_end(0, "w", None)
    s.set_end(0, "w", 10.0)  # two heap entries for one open window
    assert s.due(10.0) == [(0, "w", 10.0)]
