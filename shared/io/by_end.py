"""Open windows (or expiring keys) by end: the index a partition's store closes them from,
in Redis (``state_store``) and in memory (``pipeline.local_store``)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable


class ByEnd:
    """A partition's open windows (or a keyed operator's expiring keys) by end, oldest
    first: a heap whose entries are checked against ``end_of`` when they reach the top
    (one whose end changed or was removed since is dropped there), so the oldest and
    the due cost a logarithm each, not a scan of every open window per declaration."""

    def __init__(
        self, end_of: Callable[[int, str], float | None], entries: Iterable[tuple[float, int, str]]
    ) -> None:
        self._end_of = end_of
        self._heap = list(entries)
        heapq.heapify(self._heap)

    def push(self, end: float, group: int, field: str) -> None:
        heapq.heappush(self._heap, (end, group, field))

    def oldest(self) -> float | None:
        heap = self._heap
        while heap:
            end, group, field = heap[0]
            if self._end_of(group, field) == end:
                return end
            heapq.heappop(heap)
        return None

    def take_due(self, until: float) -> list[tuple[int, str, float]]:
        """The open ones ending at or before ``until``, by end, taken off the index (the
        caller closes each)."""
        out: list[tuple[int, str, float]] = []
        heap = self._heap
        while heap and heap[0][0] <= until:
            end, group, field = heapq.heappop(heap)
            if self._end_of(group, field) == end and (not out or out[-1] != (group, field, end)):
                out.append((group, field, end))
        return out
