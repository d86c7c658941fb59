"""LAS over Redis (Figure 1.B): the operator publishes stable (F, W) with a version and
its hash seeds; the shedder polls the version (one GET-sized call per poll, never per
tuple) and loads a new pair only when the version moved. Δ replies travel on a list.

Redis 7 from Debian has no probabilistic-structure module, so the matrices are stored as
raw float64 bytes in one hash, written atomically (MULTI/EXEC).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from typing import Any

import numpy as np

from elastic_sps.io.knowledge_base import Keys
from elastic_sps.las.sketch import Hashes, SketchPair

log = logging.getLogger(__name__)
FORMAT = 1


class SketchPublisher:
    """Operator side: ``publish_sketch`` and ``send_delta`` for ``LasOperator``."""

    def __init__(
        self, redis: Any, operator: str, keys: Keys | None = None, deltas_key: str | None = None
    ) -> None:
        """``deltas_key``: the list its Δ messages go on, when not the operator's one (an
        entry step's worker: its own gate's)."""
        self.r = redis
        self.keys = keys or Keys()
        self.op = operator
        self.deltas_key = deltas_key or self.keys.las_deltas(operator)
        self.messages = 0

    def publish_sketch(self, pair: SketchPair) -> int:
        key = self.keys.las_sketch(self.op)
        version = int(self.r.hincrby(key, "seq", 1))
        rows, cols = pair.F.shape
        pipe = self.r.pipeline(transaction=True)
        pipe.hset(
            key,
            mapping={
                "format": FORMAT,
                "version": version,
                "rows": rows,
                "cols": cols,
                "hash_a": json.dumps(pair.hashes.a.tolist()),
                "hash_b": json.dumps(pair.hashes.b.tolist()),
                "F": pair.F.astype("<f8").tobytes(),
                "W": pair.W.astype("<f8").tobytes(),
            },
        )
        pipe.execute()
        self.messages += 1
        return version

    def send_delta(self, delta: float, tag: str | None = None) -> None:
        """Δ (Listing 3.2 l. 11), optionally naming the probe it answers ("tag Δ")."""
        body = repr(float(delta)) if tag is None else f"{tag} {float(delta)!r}"
        self.r.rpush(self.deltas_key, body)
        self.messages += 1


def decode_sketch(raw: dict[bytes, bytes]) -> tuple[int, SketchPair]:
    """Validate a stored sketch; raise ValueError saying what is wrong."""

    def field(name: str) -> bytes:
        if name.encode() not in raw:
            raise ValueError(f"field {name!r} missing")
        return raw[name.encode()]

    fmt = int(field("format"))
    if fmt != FORMAT:
        raise ValueError(f"unknown sketch format {fmt} (this build reads {FORMAT})")
    version = int(field("version"))
    rows, cols = int(field("rows")), int(field("cols"))
    a = np.asarray(json.loads(field("hash_a")), dtype=np.int64)
    b = np.asarray(json.loads(field("hash_b")), dtype=np.int64)
    if rows < 1 or cols < 1 or a.shape != (rows,) or b.shape != (rows,):
        raise ValueError(f"shape {rows}x{cols} does not match {len(a)} hash functions")
    size = rows * cols * 8
    F_raw, W_raw = field("F"), field("W")
    if len(F_raw) != size or len(W_raw) != size:
        raise ValueError(f"matrices truncated: {len(F_raw)}/{len(W_raw)} bytes, want {size}")
    F = np.frombuffer(F_raw, dtype="<f8").reshape(rows, cols).copy()
    W = np.frombuffer(W_raw, dtype="<f8").reshape(rows, cols).copy()
    if not (np.isfinite(F).all() and np.isfinite(W).all()) or (F < 0).any() or (W < 0).any():
        raise ValueError("matrices hold negative or non-finite cells")
    return version, SketchPair(Hashes(a, b, cols), F, W)


class SketchSubscriber:
    """Shedder side: ``poll()`` returns a new valid pair, or None. Bad state in Redis is
    logged and skipped; the caller keeps its last good pair (or stays in NOP)."""

    def __init__(
        self, redis: Any, operator: str, keys: Keys | None = None, deltas_key: str | None = None
    ) -> None:
        """``deltas_key``: the list this subscriber's Δ replies come on, when not the
        operator's one (an entry step's gate: its worker's)."""
        self.r = redis
        self.keys = keys or Keys()
        self.op = operator
        self.deltas_key = deltas_key or self.keys.las_deltas(operator)
        self.version = 0
        self.rejected = 0
        self.reads = 0

    def poll(self) -> SketchPair | None:
        key = self.keys.las_sketch(self.op)
        self.reads += 1
        v = self.r.hget(key, "version")
        if v is None:
            return None
        try:
            if int(v) == self.version:
                return None
            version, pair = decode_sketch(self.r.hgetall(key))
        except (ValueError, TypeError, json.JSONDecodeError) as exc:
            self.rejected += 1
            log.warning("LAS sketch for %s in Redis ignored: %s", self.op, exc)
            # Do not re-read the same bad version over and over.
            with contextlib.suppress(ValueError):
                self.version = int(v)
            return None
        self.version = version
        return pair

    def deltas(self) -> list[tuple[str | None, float]]:
        """Pending Δ replies as (probe tag or None, Δ seconds); malformed ones are logged
        and skipped (a Δ is a correction, not an event: nothing is lost by skipping it)."""
        out = self.r.lpop(self.deltas_key, 1000) or []
        self.reads += 1
        replies: list[tuple[str | None, float]] = []
        for raw in out:
            tag, _, number = raw.decode("utf-8", "replace").rpartition(" ")
            try:
                delta = float(number)
                if not math.isfinite(delta):
                    raise ValueError("not a finite number")
            except ValueError as exc:
                log.warning("LAS Δ reply %r for %s ignored: %s", raw[:80], self.op, exc)
                continue
            replies.append((tag or None, delta))
        return replies
