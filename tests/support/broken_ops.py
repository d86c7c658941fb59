"""Operators with the faults ``elastic-sps check`` must name (``tests/unit/test_check.py``)."""

from __future__ import annotations

from typing import Any


def lower(ev: dict[str, Any], ctx: Any) -> list[tuple[str | None, Any]]:
    return [(None, {"text": ev["text"].lower()})]


def wrong_shape(ev: dict[str, Any], ctx: Any) -> Any:
    return ev


def raises_on_most(ev: dict[str, Any], ctx: Any) -> list[tuple[str | None, Any]]:
    if ev["n"] % 3:
        raise KeyError("lang")
    return [(None, ev)]


class OpenRaises:
    def open(self, ctx: Any) -> None:
        raise ConnectionError("model server refused")

    def process(self, ev: Any, ctx: Any) -> list[tuple[str | None, Any]]:
        return [(None, ev)]


def routes_nowhere(ev: dict[str, Any], ctx: Any) -> list[tuple[str | None, Any]]:
    """Sends its third event to a name that is not a successor."""
    return [("nope" if ev["n"] == 2 else None, ev)]


class NoMerge:
    """A session window's aggregate without merge()."""

    def initial(self) -> int:
        return 0

    def add(self, acc: int, ev: Any) -> int:
        return acc + 1
