"""Watermarks as a protocol: declared by whoever knows, combined downstream.

Every sender into an operator's partitions declares its watermark to every partition of
that operator, in the same partition order as its events: a source partition's reader
(the ingress), and each replica of an upstream operator. A declaration says "everything
I send from now on has an event time at or above ``wm``", or, with ``idle``, "I have
nothing behind me": a reader whose position has sat at its partition's end for
``idle_s`` of its own (pausable) clock, as Kafka Streams waits while lag > 0 and Flink's
``WatermarksWithIdleness`` counts idleness only while not backpressured; a replica whose
every input is idle (it processed their idle declarations, so nothing is queued ahead).

A partition's ``Valve`` (Flink's ``StatusWatermarkValve``) expects one input per sender
of its predecessors' groups (the topology's pools, the source's partition count as the
readers declare it), whether or not they delivered; an input not yet heard from holds the
watermark back. The watermark is the least over the active inputs, and, once every input
is idle, the greatest over all of them (the tail of a stream closes); it never goes back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import orjson

_HEAD = b'{"wm":'  # a declaration's first bytes (orjson keeps the key order)
DECLARE_EVERY_S = 0.2  # the most often a sender declares a changed watermark


@dataclass(frozen=True)
class Declaration:
    src: str  # the sending operator, "source" for a source partition's reader
    part: int  # its replica (partition) or source partition
    of: int  # how many senders its group has: the operator's pool, the source's partitions
    wm: float | None  # None: nothing seen yet
    idle: bool = False

    @property
    def input(self) -> str:
        return f"{self.src}/{self.part}"

    def encode(self) -> bytes:
        doc = {"wm": self.wm, "src": self.src, "part": self.part, "of": self.of}
        return orjson.dumps({**doc, "idle": self.idle})


def is_declaration(raw: bytes | None) -> bool:
    return raw is not None and raw[: len(_HEAD)] == _HEAD


def decode_declaration(raw: bytes) -> Declaration:
    doc = orjson.loads(raw)
    wm = doc["wm"]
    return Declaration(
        str(doc["src"]),
        int(doc["part"]),
        int(doc["of"]),
        None if wm is None else float(wm),
        bool(doc.get("idle", False)),
    )


@dataclass(frozen=True)
class InputMark:
    wm: float | None
    idle: bool
    of: int


class Valve:
    """One partition's watermark from its inputs' declarations.

    ``senders``: each predecessor's group size (None: learnt from its declarations, as
    the source's partition count is)."""

    def __init__(
        self,
        senders: Mapping[str, int | None],
        marks: Mapping[str, InputMark] | None = None,
        current: float | None = None,
    ) -> None:
        self.senders = dict(senders)
        self.marks: dict[str, InputMark] = dict(marks or {})
        self.current = current
        self.changed: set[str] = set()  # inputs whose mark changed since ``taken``

    def declare(self, d: Declaration) -> bool:
        """Take one declaration; True if the partition's watermark advanced."""
        before = self.marks.get(d.input)
        wm = d.wm
        if before is not None and before.wm is not None and (wm is None or wm < before.wm):
            wm = before.wm  # an input's watermark never goes back (a repeat, a retry)
        mark = InputMark(wm, d.idle, d.of)
        if mark != before:
            self.marks[d.input] = mark
            self.changed.add(d.input)
        return self._advance()

    def _expected(self) -> list[str] | None:
        names: list[str] = []
        for src, of in self.senders.items():
            if of is None:
                of = next((m.of for k, m in self.marks.items() if k.startswith(src + "/")), None)
                if of is None:
                    return None  # not heard from at all: holds the watermark back
            names.extend(f"{src}/{j}" for j in range(of))
        return names

    def _combined(self) -> float | None:
        expected = self._expected()
        if expected is None or any(n not in self.marks for n in expected):
            return None
        marks = [self.marks[n] for n in expected]
        active = [m.wm for m in marks if not m.idle]
        if active:
            return (
                None if any(t is None for t in active) else min(t for t in active if t is not None)
            )
        seen = [m.wm for m in marks if m.wm is not None]
        return max(seen) if seen else None

    def _advance(self) -> bool:
        t = self._combined()
        if t is not None and (self.current is None or t > self.current):
            self.current = t
            return True
        return False

    @property
    def idle(self) -> bool:
        """Every expected input is idle: the partition has nothing behind it."""
        expected = self._expected()
        return expected is not None and all(
            n in self.marks and self.marks[n].idle for n in expected
        )


class SourceClock:
    """A source partition reader's watermark: the latest event time it read; idle once
    its position has been at the partition's end for ``idle_s`` (the clock runs only
    while at the end, so a reader that is behind is never idle)."""

    def __init__(self, idle_s: float) -> None:
        self.idle_s = idle_s
        self.wm: float | None = None
        self._at_end_since: float | None = None

    def read(self, event_time: float) -> None:
        if self.wm is None or event_time > self.wm:
            self.wm = event_time
        self._at_end_since = None

    def position(self, at_end: bool, now: float) -> None:
        if not at_end:
            self._at_end_since = None
        elif self._at_end_since is None:
            self._at_end_since = now

    def wake(self) -> None:
        """Count ``idle_s`` at the end anew (the stream resumed elsewhere)."""
        self._at_end_since = None

    def idle(self, now: float) -> bool:
        return self._at_end_since is not None and now - self._at_end_since >= self.idle_s
