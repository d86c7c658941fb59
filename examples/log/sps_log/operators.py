"""The PA-SPS log application (§4.6.3): parse a line, extract its template, count by level,
store."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from typing import Any

from elastic_sps.io.envelope import BadEvent

LINE = re.compile(r"^(\S+ \S+) (DEBUG|INFO|WARN|ERROR) \[([^\]]+)\] (.*)$")
VARIABLE = re.compile(r"\b(0x[0-9a-f]+|\d+(\.\d+)*|[0-9a-f]{8,})\b", re.I)


def parse(payload: Any, ctx: Any) -> list[tuple[str | None, Any]]:
    m = LINE.match(payload if isinstance(payload, str) else "")
    if not m:
        raise BadEvent("parse: not a '<date> <time> <LEVEL> [component] message' log line")
    return [
        (
            None,
            {"at": m.group(1), "level": m.group(2), "component": m.group(3), "message": m.group(4)},
        )
    ]


def template(e: Any, ctx: Any) -> list[tuple[str | None, Any]]:
    return [(None, {**e, "template": VARIABLE.sub("<*>", e["message"])})]


def count_level(e: Any, ctx: Any) -> list[tuple[str | None, Any]]:
    return [(None, {"level": e["level"], "template": e["template"]})]


def store(e: Any, ctx: Any) -> list[tuple[str | None, Any]]:
    ctx.writes.hincrby(f"{ctx.prefix}:app:log:levels", e["level"], 1)
    return []


def generate(n: int, seed: int = 0) -> Iterator[str]:
    rng = random.Random(seed)
    msgs = [
        "Received block blk_{} of size {} from 10.0.{}.{}",
        "Deleting block blk_{} file {}",
        "PacketResponder {} for block blk_{} terminating",
        "Served block blk_{} to {}",
    ]
    for k in range(n):
        level = rng.choices(["INFO", "WARN", "ERROR", "DEBUG"], [80, 10, 3, 7])[0]
        msg = rng.choice(msgs).format(*(rng.randint(1, 99999) for _ in range(4)))
        yield f"081109 {200000 + k % 60000:06d} {level} [dfs.DataNode] {msg}"
