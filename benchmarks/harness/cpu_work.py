"""A CPU-bound user operator for the capacity benchmark: 2 ms of pure-Python work per
event (holding the GIL, as parsing or model inference does)."""

from __future__ import annotations

import time
from typing import Any

CPU_S = 0.002


def burn(payload: Any, ctx: Any) -> list[tuple[str | None, Any]]:
    end = time.thread_time() + CPU_S
    spins = 0
    while time.thread_time() < end:
        spins += 1
    return [(None, payload)]
