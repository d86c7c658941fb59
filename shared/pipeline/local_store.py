"""One partition's keyed state in this process's memory: what ``shared.io.state_store``'s
``PartitionStore`` keeps in Redis, for the in-process runner (``local_run``). Same
methods, no commit: an in-process run has no crash to be exactly-once across."""

from __future__ import annotations

import heapq
from typing import Any

from shared.io.state_store import MISSING


class MemoryStore:
    def __init__(self) -> None:
        self.inputs: dict[str, tuple[float, float]] = {}
        self.watermark: float | None = None
        self._values: dict[tuple[str, int, str], Any] = {}
        self._ends: dict[tuple[int, str], float] = {}
        # windows by end, oldest first; an entry whose end changed since is skipped
        self._by_end: list[tuple[float, int, str]] = []

    def get(self, kind: str, group: int, field: str) -> Any:
        return self._values.get((kind, group, field), MISSING)

    def prefetch(self, wanted: list[tuple[str, int, str]]) -> None:
        pass

    def put(self, kind: str, group: int, field: str, value: Any) -> None:
        self._values[(kind, group, field)] = value

    def delete(self, kind: str, group: int, field: str) -> None:
        self._values.pop((kind, group, field), None)

    def set_end(self, group: int, field: str, end: float | None) -> None:
        if end is None:
            self._ends.pop((group, field), None)
        elif self._ends.get((group, field)) != end:
            self._ends[(group, field)] = end
            heapq.heappush(self._by_end, (end, group, field))

    def due(self, until: float) -> list[tuple[int, str, float]]:
        """The open windows ending at or before ``until``, by end (taken off the index:
        the caller closes each)."""
        out = []
        while self._by_end and self._by_end[0][0] <= until:
            end, group, field = heapq.heappop(self._by_end)
            if self._ends.get((group, field)) == end:
                out.append((group, field, end))
        return out

    def see_input(self, name: str, event_time: float, wall: float) -> None:
        latest = max(event_time, self.inputs.get(name, (event_time, 0.0))[0])
        self.inputs[name] = (latest, wall)

    def advance_watermark(self, value: float | None) -> float | None:
        if value is not None and (self.watermark is None or value > self.watermark):
            self.watermark = value
        return self.watermark

    def state(self) -> dict[str, Any]:
        """Every key's ``ctx.state`` (a keyed operator's), for a test to look at."""
        return {field: v for (kind, _, field), v in self._values.items() if kind == "s"}
