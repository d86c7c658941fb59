"""What a keyed or window operator does with one event, on a partition's store.

* A **keyed** operator's code is an ordinary operator; for each event it gets ``ctx.key``
  and ``ctx.state``, that key's mapping of JSON values (``KeyState``), kept across events,
  resizes and restarts (``elastic_sps.io.state_store``).
* A **window** operator's code is an aggregate: a class with ``initial()``,
  ``add(acc, payload) -> acc`` and optionally ``result(acc) -> value`` and
  ``merge(a, b) -> acc`` (sessions need it). When a window closes (``windows.py``) the
  operator emits ``{"key", "start", "end", "value"}`` with the id ``<key>@<start>``, once
  per key and window; an event whose every window has closed is ``Late``. A hopping
  window whose size is a whole number of slides, with an aggregate that can ``merge``,
  keeps one accumulator per key and slide (a pane) and merges a window's panes when it
  closes: an event is added once, not once per window it falls in (Flink's window
  slicing).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from elastic_sps.io.state_store import MISSING, member_kind, window_field
from elastic_sps.model.keyed import key_group
from elastic_sps.model.records import lookup_first
from elastic_sps.model.topology import Operator
from elastic_sps.pipeline.key_state import KeyState
from elastic_sps.pipeline.operators import OperatorLoadError, resolve


class Store(Protocol):
    """A partition's state as keyed and window operators use it: ``PartitionStore`` in
    Redis, ``elastic_sps.pipeline.local_store.MemoryStore`` in one process."""

    watermark: float | None

    def get(self, kind: str, group: int, field: str) -> Any: ...
    def prefetch(self, wanted: list[tuple[str, int, str]], ids: Iterable[str] = ()) -> None: ...
    def put(self, kind: str, group: int, field: str, value: Any) -> None: ...
    def delete(self, kind: str, group: int, field: str) -> None: ...
    def set_end(self, group: int, field: str, end: float | None) -> None: ...
    def due(self, until: float) -> list[tuple[int, str, float]]: ...
    def oldest_end(self) -> float | None: ...
    def end_of(self, group: int, field: str) -> float | None: ...
    def applied(self, event_id: str) -> bool: ...
    def mark_applied(self, event_id: str) -> None: ...


class NoKey(ValueError):
    """The event has no key at the operator's ``key`` path (dead-lettered)."""


def event_key(op: Operator, payload: Any) -> str:
    """The key of ``payload`` for a keyed operator ("" for a window over all events)."""
    if not op.key:
        return ""
    found = lookup_first(payload, op.key_path)
    if found is None:
        raise NoKey(f"no key at {op.key[len('field:') :]!r} for keyed operator {op.name!r}")
    return found


def key_or_none(op: Operator, payload: Any) -> str | None:
    """``payload``'s key for ``op``; None when it has none (the engine's ``NoKey`` then
    gives the event its fate)."""
    try:
        return event_key(op, payload)
    except NoKey:
        return None


def open_aggregate(code: str, operator: str) -> Any:
    """A window operator's aggregate: an instance of the class ``code`` names."""
    cls = resolve(code, operator)
    if not inspect.isclass(cls) or not all(
        callable(getattr(cls, m, None)) for m in ("initial", "add")
    ):
        raise OperatorLoadError(
            f"operator {operator!r}: a window operator's code is a class with initial() and "
            f"add(acc, payload); {code!r} is not"
        )
    try:
        return cls()
    except Exception as exc:
        raise OperatorLoadError(
            f"operator {operator!r}: {code}() failed ({type(exc).__name__}: {exc})"
        ) from exc


class Count:
    """The aggregate of a window operator without ``code``: events per key and window."""

    def initial(self) -> int:
        return 0

    def add(self, acc: int, payload: Any) -> int:
        return acc + 1

    def merge(self, a: int, b: int) -> int:
        return a + b


class AggregateOperator:
    """A window operator's aggregate as an operator: measured (``costs``) as one ``add``
    per event; the dataplane calls the aggregate itself (``WindowAggregator``)."""

    def __init__(self, aggregate: Any) -> None:
        self.aggregate = aggregate

    def open(self, ctx: Any) -> None:
        pass

    def process(self, payload: Any, ctx: Any) -> list[Any]:
        self.aggregate.add(self.aggregate.initial(), payload)
        return []

    def close(self) -> None:
        pass


class MemberStates:
    """A keyed chain's members' states of one key, each a ``KeyState`` of its own kind
    (``s:<member>``), opened at a member's first call for the event, saved with the
    head's (``save``) once the whole chain returned."""

    def __init__(self, store: Store, group: int, key: str) -> None:
        self.store, self.group, self.key = store, group, key
        self.opened: dict[str, KeyState] = {}

    def of(self, member: str) -> KeyState:
        if member not in self.opened:
            self.opened[member] = KeyState(self.store, self.group, self.key, member_kind(member))
        return self.opened[member]

    def save(self) -> None:
        for state in self.opened.values():
            state.save()


def state_fields(op: Operator, key: str, t: float, panes: int = 0) -> list[tuple[str, int, str]]:
    """The store entries an event with ``key`` (``event_key``) will read: its key's
    state (a keyed chain's: each keyed member's too), or its windows' accumulators (a
    session: the key's sessions; ``panes`` slides a window: its pane's)."""
    g = key_group(key, op.key_groups)
    if op.window is None:
        kinds = ["s"] + [member_kind(m.name) for m in op.keyed_members]
        return [(kind, g, key) for kind in kinds]
    if op.window.kind == "session":
        return [("w", g, window_field(key, None))]
    if panes:
        return [("w", g, pane_field(key, op.window.slide_index(t)))]
    return [("w", g, window_field(key, start)) for start, _ in op.window.assign(t)]


@functools.lru_cache(maxsize=1 << 14)
def pane_field(key: str, n: int) -> str:
    """Pane ``n`` of ``key`` (event times [n, n + 1) slides) in its group's hash: apart
    from every window's field."""
    return orjson.dumps([key, n, "pane"]).decode()


def slides_per_window(op: Operator, aggregate: Any) -> int:
    """How many panes a window of ``op`` merges; 0: it keeps an accumulator per window
    (not hopping, a size not a whole number of slides, or an aggregate without merge)."""
    spec = op.window
    if spec is None or spec.kind != "hopping" or not callable(getattr(aggregate, "merge", None)):
        return 0
    k = spec.size_s / spec.slide_s
    return round(k) if abs(k - round(k)) < 1e-9 and round(k) > 1 else 0


class Late(ValueError):
    """The event's every window had closed when it arrived (its fate: late)."""


@dataclass(frozen=True)
class WindowResult:
    id: str  # <key>@<start>: a repeat after a crash carries the same id
    end: float
    payload: dict[str, Any]

    @property
    def event_time(self) -> float:
        """The result's own event time: its window's last instant (Flink's
        ``window.maxTimestamp()``), so a next window stage of the same size places it in
        the same window, not the one after."""
        return max_timestamp(self.end)


def max_timestamp(end: float) -> float:
    return end - 0.001


_IMMUTABLE = (int, float, str, bool)  # an accumulator no ``merge`` can change in place


class WindowAggregator:
    """A window operator's per-event step and its firing, on one partition's store."""

    def __init__(self, op: Operator, aggregate: Any) -> None:
        assert op.window is not None
        self.op, self.spec, self.agg = op, op.window, aggregate
        if self.spec.kind == "session" and not callable(getattr(aggregate, "merge", None)):
            raise OperatorLoadError(
                f"operator {op.name!r}: a session window's aggregate needs merge(a, b)"
            )
        self.panes = slides_per_window(op, aggregate)

    def fields(self, key: str, t: float) -> list[tuple[str, int, str]]:
        """The store entries an event at ``t`` with ``key`` reads (``state_fields``)."""
        return state_fields(self.op, key, t, self.panes)

    def add(self, store: Store, payload: Any, t: float, key: str | None = None) -> None:
        """Add one event (event time ``t``; ``key``: its key if extracted already) to its
        windows; all or nothing if the aggregate raises."""
        key = event_key(self.op, payload) if key is None else key
        g = key_group(key, self.op.key_groups)
        if self.spec.kind == "session":
            self._add_session(store, g, key, payload, t)
            return
        if self.panes:
            self._add_to_pane(store, g, key, payload, t)
            return
        if self.spec.kind == "tumbling":
            self._add_to_window(store, g, key, payload, t)
            return
        wm = store.watermark
        open_windows = [w for w in self.spec.assign(t) if not self.spec.closed(w[1], wm)]
        if not open_windows:
            raise Late(f"event time {t} is behind the watermark {wm}: its windows closed")
        updates: list[tuple[str, float | None, Any]] = []
        for start, end in open_windows:
            field = window_field(key, start)
            acc = store.get("w", g, field)
            opened = acc is MISSING
            acc = self.agg.add(self.agg.initial() if opened else acc, payload)
            updates.append((field, end if opened else None, acc))
        for field, opened_end, acc in updates:
            store.put("w", g, field, acc)
            if opened_end is not None:  # a window with an accumulator has its end recorded
                store.set_end(g, field, opened_end)

    def _add_to_window(self, store: Store, g: int, key: str, payload: Any, t: float) -> None:
        """A tumbling window's event: its one window, as ``add`` does for any number."""
        ((start, end),) = self.spec.assign(t)
        if self.spec.closed(end, store.watermark):
            raise Late(
                f"event time {t} is behind the watermark {store.watermark}: its windows closed"
            )
        field = window_field(key, start)
        acc = store.get("w", g, field)
        opened = acc is MISSING
        store.put("w", g, field, self.agg.add(self.agg.initial() if opened else acc, payload))
        if opened:  # a window with an accumulator has its end recorded
            store.set_end(g, field, end)

    def _add_to_pane(self, store: Store, g: int, key: str, payload: Any, t: float) -> None:
        """The event into its pane. A new pane records the end of each open window it
        falls in; a pane there already had them recorded when it opened (the watermark
        only closes more since), so only its newest window is asked whether it is open."""
        spec, wm, n = self.spec, store.watermark, self.spec.slide_index(t)
        field = pane_field(key, n)
        acc = store.get("w", g, field)
        if acc is not MISSING:
            if spec.closed(spec.window(n)[1], wm):
                raise Late(f"event time {t} is behind the watermark {wm}: its windows closed")
            store.put("w", g, field, self.agg.add(acc, payload))
            return
        windows = [
            w
            for m in range(n - self.panes + 1, n + 1)
            if not spec.closed((w := spec.window(m))[1], wm)
        ]  # the windows whose panes it joins (``_reads``)
        if not windows:
            raise Late(f"event time {t} is behind the watermark {wm}: its windows closed")
        store.put("w", g, field, self.agg.add(self.agg.initial(), payload))
        for start, end in windows:
            window = window_field(key, start)
            if store.end_of(g, window) is None:
                store.set_end(g, window, end)

    def _add_session(self, store: Store, g: int, key: str, payload: Any, t: float) -> None:
        gap = self.spec.size_s
        sessions = store.get("w", g, window_field(key, None))
        sessions = [] if sessions is MISSING else [list(s) for s in sessions]
        start, end, acc = t, t + gap, self.agg.add(self.agg.initial(), payload)
        keep, merged = [], []
        for s_start, s_end, s_acc in sessions:
            if s_start < end and start < s_end:  # overlapping: merge into one session
                merged.append(s_start)
                start, end = min(start, s_start), max(end, s_end)
                acc = self.agg.merge(s_acc, acc)
            else:
                keep.append([s_start, s_end, s_acc])
        if self.spec.closed(end, store.watermark):
            raise Late(
                f"event time {t} is behind the watermark {store.watermark}: its windows closed"
            )
        for s_start in merged:
            store.set_end(g, window_field(key, s_start), None)
        keep.append([start, end, acc])
        store.put("w", g, window_field(key, None), sorted(keep))
        store.set_end(g, window_field(key, start), end)

    def fire(self, store: Store, watermark: float | None) -> list[WindowResult]:
        """Every window ``watermark`` closes (end + lateness at or below it), removed
        from the partition's state; their accumulators read in one round trip."""
        if watermark is None:
            return []
        due = store.due(watermark - self.spec.lateness_s)
        if not due:
            return []
        windows = [(g, field, end, *orjson.loads(field)) for g, field, end in due]
        store.prefetch([w for g, f, _, k, start in windows for w in self._reads(g, f, k, start)])
        out = []
        for g, field, end, key, start in windows:
            acc = self._take(store, g, key, start, field)
            store.set_end(g, field, None)
            if acc is MISSING:
                continue
            value = self.agg.result(acc) if callable(getattr(self.agg, "result", None)) else acc
            body = {"key": key, "start": float(start), "end": float(end), "value": value}
            out.append(WindowResult(f"{key}@{start}", float(end), body))
        return out

    def _reads(self, g: int, field: str, key: str, start: float) -> list[tuple[str, int, str]]:
        """What closing the window ``field`` (of ``key`` from ``start``) reads: its
        accumulator, its panes or its key's sessions."""
        if self.spec.kind == "session":
            return [("w", g, window_field(key, None))]
        if self.panes:  # and its own field: what a version before panes kept (``_merged``)
            first = round(start / self.spec.slide_s)
            panes = [("w", g, pane_field(key, n)) for n in range(first, first + self.panes)]
            return [("w", g, field), *panes]
        return [("w", g, field)]

    def _merged(self, store: Store, g: int, key: str, start: float, field: str) -> Any:
        """A window's panes merged, oldest first, each a copy (a pane serves later windows
        too, and ``merge`` may change either argument, or return one it may change
        next); its first pane, which no later window holds, removed. A window opened by
        a version that kept an accumulator per window has its events there: merged
        first, then removed (no pane holds them)."""
        first = round(start / self.spec.slide_s)
        acc = store.get("w", g, field)
        if acc is not MISSING:
            store.delete("w", g, field)
        for n in range(first, first + self.panes):
            pane = store.get("w", g, pane_field(key, n))
            if pane is not MISSING:
                if not isinstance(pane, _IMMUTABLE):
                    pane = orjson.loads(orjson.dumps(pane))
                acc = pane if acc is MISSING else self.agg.merge(acc, pane)
        store.delete("w", g, pane_field(key, first))
        return acc

    def _take(self, store: Store, g: int, key: str, start: float, field: str) -> Any:
        if self.panes:
            return self._merged(store, g, key, start, field)
        if self.spec.kind != "session":
            acc = store.get("w", g, field)
            store.delete("w", g, field)
            return acc
        whole = window_field(key, None)
        sessions = store.get("w", g, whole)
        sessions = [] if sessions is MISSING else list(sessions)
        found = [s for s in sessions if s[0] == start]
        rest = [s for s in sessions if s[0] != start]
        if rest:
            store.put("w", g, whole, rest)
        else:
            store.delete("w", g, whole)
        return found[0][2] if found else MISSING
