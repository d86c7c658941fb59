"""A replica's feed inside an epoch: what its task's reader hands it, a read's records of
one partition at a time, beside the hand-over items (``handover``) and the window's end.

A read's records travel as one item: handed over one by one, the queue's lock and the
thread switch cost more than the record's own step on a loaded worker."""

from __future__ import annotations

from queue import SimpleQueue
from typing import Any, NamedTuple

WINDOW_END = object()  # the feed's last item: the window is over


class Batch(NamedTuple):
    """One read's records of one partition, in offset order, and when they were read
    (``time.perf_counter``)."""

    records: list[Any]
    at: float


class Feed(SimpleQueue[Any]):
    """A replica's queue, counting the records in it: the reader, its one writer of
    batches, bounds what it reads ahead by them (``reading.ReadAhead``); the replica
    says what it took (``took``). Each count has one writing thread."""

    def __init__(self) -> None:
        super().__init__()
        self.put_records = 0
        self.taken_records = 0

    def put_batch(self, batch: Batch) -> None:
        self.put_records += len(batch.records)
        self.put(batch)

    def took(self, records: int) -> None:
        self.taken_records += records

    def records(self) -> int:
        """Records put and not yet taken."""
        return self.put_records - self.taken_records


def size(item: object) -> int:
    """The records a feed item carries (a hand-over item or the end: none)."""
    return len(item.records) if isinstance(item, Batch) else 0
