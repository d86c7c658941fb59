"""What a task's live reader tells the entry step (``reading.Reads``): each read's records
as arrivals, but those an earlier task counted; and whether the read caught up, which
it did only if it came back short, nothing is paused and every partition is read to the
end its reader last saw."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_sps.services.dataplane.reading import Reads
from tests.support.records import Record

pytestmark = pytest.mark.unit


def reads(**kw: Any) -> tuple[Reads, list[tuple[list[int], bool]]]:
    seen: list[tuple[list[int], bool]] = []
    out = Reads(
        received=lambda msgs, began, caught: seen.append(([m.offset() for m in msgs], caught)), **kw
    )
    return out, seen


def records(partition: int, *offsets: int) -> list[Record]:
    return [Record(partition, at, b"{}") for at in offsets]


def test_what_an_earlier_task_counted_is_not_counted_again() -> None:
    r, seen = reads(counted={0: 5})
    r.count(records(0, 3, 4, 5, 6), 1.0, True, {0: 3})
    assert seen == [([5, 6], False)]  # the end not seen yet: not caught up
    assert r.read_to == {0: 7}


def test_caught_up_needs_every_partition_at_its_end_and_nothing_paused() -> None:
    r, seen = reads(ends={0: 7, 1: 2})
    r.count(records(0, 5, 6), 1.0, True, {0: 5, 1: 0})
    r.count(records(1, 0, 1), 2.0, False, {0: 5, 1: 0})  # a full read: more may wait
    r.count([], 3.0, True, {0: 5, 1: 0})
    r.paused.add(1)
    r.count([], 4.0, True, {0: 5, 1: 0})
    assert [caught for _, caught in seen] == [False, False, True, False]
