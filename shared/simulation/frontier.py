"""A policy family's saved-resources/latency trade-off: its runs over a knob (a
utilisation target U) as points, the frontier of those no other point beats on both, and
comparisons between families' frontiers.

A point is (saved resources, mean latency): more saved is better, less latency is better.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise


@dataclass(frozen=True)
class Point:
    saved: float
    latency_ms: float
    label: str = ""


def beats(a: Point, b: Point) -> bool:
    """``a`` at least as good as ``b`` on both axes."""
    return a.saved >= b.saved and a.latency_ms <= b.latency_ms


def frontier(points: Iterable[Point]) -> list[Point]:
    """The points no other point beats with one axis strictly better, by saved ascending
    (their latency then ascends too); of equal points the first is kept."""
    pts = list(points)
    out: list[Point] = []
    for p in pts:
        dominated = any(
            beats(q, p) and (q.saved > p.saved or q.latency_ms < p.latency_ms) for q in pts
        )
        if not dominated and not any(
            (q.saved, q.latency_ms) == (p.saved, p.latency_ms) for q in out
        ):
            out.append(p)
    return sorted(out, key=lambda p: (p.saved, p.latency_ms))


def covers(mine: Sequence[Point], theirs: Sequence[Point]) -> bool:
    """Every one of ``theirs`` is beaten (saved ≥, latency ≤) by one of ``mine``: my
    frontier lies on or below theirs wherever theirs has a point."""
    return all(any(beats(m, t) for m in mine) for t in theirs)


def latency_at(front: Sequence[Point], saved: float) -> float | None:
    """The family's latency at ``saved`` resources, linear between its frontier's points;
    below its least saved, its lowest latency (that point saves more); above its most
    saved, None (it never saves that much)."""
    if not front:
        return None
    pts = sorted(front, key=lambda p: p.saved)
    if saved <= pts[0].saved:
        return pts[0].latency_ms
    if saved > pts[-1].saved:
        return None
    for lo, hi in pairwise(pts):
        if lo.saved <= saved <= hi.saved:
            if hi.saved == lo.saved:
                return lo.latency_ms
            w = (saved - lo.saved) / (hi.saved - lo.saved)
            return lo.latency_ms + w * (hi.latency_ms - lo.latency_ms)
    return pts[-1].latency_ms


def on_or_below(point: Point, front: Sequence[Point]) -> bool:
    """``point``'s latency is at most ``front``'s at the same saved resources (it saves
    more than every point of ``front``: no point of it saves as much, so nothing there
    beats it)."""
    at = latency_at(front, point.saved)
    return at is None or point.latency_ms <= at
