"""One partition's keyed state in this process's memory: what ``elastic_sps.io.state_store``'s
``PartitionStore`` keeps in Redis, for the in-process runner (``local_run``) and the
engine's unit tests. Same methods; ``commit`` keeps what was applied (no other attempt can
overtake one in a process)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from elastic_sps.io.by_end import ByEnd
from elastic_sps.io.state_store import MISSING
from elastic_sps.io.watermarks import InputMark


class MemoryStore:
    def __init__(self) -> None:
        self.watermark: float | None = None
        self.marks: dict[str, InputMark] = {}
        self.committed: int | None = None
        self._values: dict[tuple[str, int, str], Any] = {}
        self._ends: dict[tuple[int, str], float] = {}
        self._by_end = ByEnd(self.end_of, ())
        self._applied: set[str] = set()

    def get(self, kind: str, group: int, field: str) -> Any:
        return self._values.get((kind, group, field), MISSING)

    def prefetch(self, wanted: list[tuple[str, int, str]], ids: Iterable[str] = ()) -> None:
        pass

    def put(self, kind: str, group: int, field: str, value: Any) -> None:
        self._values[(kind, group, field)] = value

    def delete(self, kind: str, group: int, field: str) -> None:
        self._values.pop((kind, group, field), None)

    def applied(self, event_id: str) -> bool:
        return event_id in self._applied

    def mark_applied(self, event_id: str) -> None:
        self._applied.add(event_id)

    def set_end(self, group: int, field: str, end: float | None) -> None:
        if end is None:
            self._ends.pop((group, field), None)
        elif self._ends.get((group, field)) != end:
            self._ends[(group, field)] = end
            self._by_end.push(end, group, field)

    def due(self, until: float) -> list[tuple[int, str, float]]:
        """The open windows ending at or before ``until``, by end (taken off the index:
        the caller closes each)."""
        return self._by_end.take_due(until)

    def end_of(self, group: int, field: str) -> float | None:
        return self._ends.get((group, field))

    def oldest_end(self) -> float | None:
        """The end of the oldest open window (None: none is open)."""
        return self._by_end.oldest()

    def note_marks(
        self, watermark: float | None, marks: dict[str, InputMark], changed: set[str]
    ) -> None:
        self.watermark, self.marks = watermark, marks

    def state(self) -> dict[str, Any]:
        """Every key's ``ctx.state`` (a keyed operator's), for a test to look at."""
        return {field: v for (kind, _, field), v in self._values.items() if kind == "s"}

    def open_windows(self) -> int:
        """How many window accumulators it holds, windows' or panes' (a closed window's
        and its last pane's are gone once fired)."""
        return sum(1 for (kind, _, _) in self._values if kind == "w")
