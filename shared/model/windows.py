"""Event-time windows: which windows an event time falls in, and when one closes.

An operator's ``window:`` is ``{tumbling_s: S}``, ``{hopping_s: S, slide_s: P}`` or
``{session_gap_s: G}``, with ``lateness_s`` (default 0). Windows are aligned to the
epoch, [start, end) in the source's time unit (epoch seconds). A window closes when the
operator's watermark reaches its end plus the lateness (``closed``); the watermark is
declared by the operator's inputs (``elastic_sps.io.watermarks``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

KINDS = ("tumbling_s", "hopping_s", "session_gap_s")
IDLE_S = 5.0  # the default time a source reader sits at its partition's end before idle


class WindowError(ValueError):
    """A ``window:`` that does not say one kind of window with valid sizes."""


@dataclass(frozen=True)
class WindowSpec:
    kind: str  # tumbling, hopping or session
    size_s: float  # the window's length (a session's gap)
    slide_s: float  # how far consecutive windows start apart (= size for tumbling)
    lateness_s: float = 0.0
    # a tumbling window's last assignment: [start, end) and the window; consecutive
    # events mostly fall in one window, and a bound check is a fifth of ``slide_index``
    _last: tuple[float, float, tuple[float, float]] | None = field(
        default=None, init=False, compare=False, hash=False, repr=False
    )

    @classmethod
    def parse(cls, doc: Mapping[str, Any], where: str = "window") -> WindowSpec:
        if not isinstance(doc, Mapping):
            raise WindowError(f"{where} must be a mapping, e.g. {{tumbling_s: 10}}")
        unknown = set(doc) - {*KINDS, "slide_s", "lateness_s"}
        kinds = [k for k in KINDS if k in doc]
        if unknown or len(kinds) != 1:
            raise WindowError(
                f"{where} needs exactly one of {', '.join(KINDS)} "
                f"(slide_s with hopping_s, lateness_s); got {sorted(doc)}"
            )
        size = _positive(doc[kinds[0]], f"{where}.{kinds[0]}")
        lateness = float(doc.get("lateness_s", 0.0))
        if not (math.isfinite(lateness) and lateness >= 0):
            raise WindowError(f"{where}.lateness_s must be >= 0, got {lateness}")
        if kinds[0] == "hopping_s":
            if "slide_s" not in doc:
                raise WindowError(f"{where}.hopping_s needs slide_s")
            slide = _positive(doc["slide_s"], f"{where}.slide_s")
            if slide > size:
                raise WindowError(f"{where}.slide_s {slide} is longer than hopping_s {size}")
            return cls("hopping", size, slide, lateness)
        if "slide_s" in doc:
            raise WindowError(f"{where}.slide_s goes with hopping_s only")
        kind = "tumbling" if kinds[0] == "tumbling_s" else "session"
        return cls(kind, size, size, lateness)

    def to_dict(self) -> dict[str, float]:
        key = {"tumbling": "tumbling_s", "hopping": "hopping_s", "session": "session_gap_s"}
        out = {key[self.kind]: self.size_s}
        if self.kind == "hopping":
            out["slide_s"] = self.slide_s
        if self.lateness_s:
            out["lateness_s"] = self.lateness_s
        return out

    def assign(self, t: float) -> list[tuple[float, float]]:
        """The windows [start, end) event time ``t`` falls in, oldest first; a session's
        own window before merging: [t, t + gap)."""
        if self.kind == "session":
            return [(t, t + self.size_s)]
        last = self._last  # read once: replica threads share the spec
        if last is not None and last[0] <= t < last[1]:
            return [last[2]]
        m = self.slide_index(t)
        if self.kind == "tumbling":  # one window, the slide's own
            window = self.window(m)
            object.__setattr__(self, "_last", (window[0], window[1], window))
            return [window]
        out = [self.window(m)]
        while (window := self.window(m := m - 1))[1] > t:
            out.append(window)
        return out[::-1]

    def window(self, n: int) -> tuple[float, float]:
        """Window ``n``, the one starting ``n`` slides from the epoch: [start, end)."""
        return bounds(n, self.slide_s, self.size_s)

    def slide_index(self, t: float) -> int:
        """The slide ``t`` falls in: the last ``n`` whose window starts at or before ``t``
        (0.3 / 0.1 is 2.9999999999999996, and 1784742435.8 / 0.1 is 17847424357.999998)."""
        q = t / self.slide_s
        n = math.floor(q)
        margin = 1e-6 + abs(q) * 1e-15  # far above q's float error: no bound is near
        if margin < q - n < 1 - margin:
            return n
        while self.window(n + 1)[0] <= t:
            n += 1
        while self.window(n)[0] > t:
            n -= 1
        return n

    def closed(self, end: float, watermark: float | None) -> bool:
        """Whether a window ending at ``end`` has closed under ``watermark``: the same
        float expression a firing asks its store for (``due(watermark - lateness)``)."""
        return watermark is not None and end <= watermark - self.lateness_s


def _positive(value: Any, where: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise WindowError(f"{where} must be a number, got {value!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise WindowError(f"{where} must be positive, got {value!r}")
    return v


@functools.lru_cache(maxsize=4096, typed=True)
def bounds(n: int, slide_s: float, size_s: float) -> tuple[float, float]:
    """Window ``n``'s [start, end): n slides from the epoch, computed in decimal from the
    slide and size as written (their shortest repr), to 9 decimals, then the nearest
    float: a bound is the float an event time written the same way parses to, at any
    magnitude (a float product carries noise: 0.1 * 3, or 17847424358 * 0.1 =
    1784742435.8000002). Cached: consecutive events mostly fall in the same windows."""
    start = Decimal(n) * Decimal(repr(slide_s))
    return _number(start), _number(start + Decimal(repr(size_s)))


def _number(d: Decimal) -> float:
    """``d`` to 9 decimals as a float; integral: an int (a window's name keeps its
    spelling: ``10``, not ``10.0``)."""
    r = d.quantize(_NANO, rounding=ROUND_HALF_EVEN)
    return int(r) if r == r.to_integral_value() else float(r)


_NANO = Decimal("1e-9")
