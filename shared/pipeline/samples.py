"""Sample events for trying and measuring a pipeline: a file of payloads, the topology's
``source.sample_events`` file, or its ``source.generator``.

A file is JSON lines (one payload a line), except for a ``text`` or ``bytes`` source whose
file does not end in ``.jsonl`` or ``.ndjson``: there each line is one record as it would
arrive (a log file, say), not a JSON string."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import orjson

from elastic_sps.model.topology import Topology
from elastic_sps.pipeline.operators import resolve

GENERATED = 5000  # payloads drawn from a generator (then cycled)
JSON_LINES = (".jsonl", ".ndjson")  # read as JSON whatever the source's format


class RawLine(bytes):
    """A sample line that is not JSON: passed on as the record it would be, so the
    source dead-letters it with the reason, as the live ingress does."""


def read_events(path: Path, fmt: str = "json") -> list[Any]:
    """The payloads of ``path`` for a source of format ``fmt`` (see the module's text); a
    line that is not JSON where JSON is expected is kept as a ``RawLine``."""
    if not path.exists():
        raise FileNotFoundError(f"events file {path} does not exist")
    if fmt != "json" and path.suffix not in JSON_LINES:
        return [line for line in path.read_text().splitlines() if line.strip()]
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            try:
                out.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                out.append(RawLine(line.encode()))
    return out


def sample_payloads(
    topo: Topology, events_file: str | Path | None = None, seed: int = 0
) -> list[Any] | None:
    """The payloads of ``events_file``, else of the topology's sample file or generator;
    None when the topology names neither."""
    src = topo.source
    path = events_file or (topo.relative(src.sample_events) if src.sample_events else None)
    if path is not None:
        payloads = read_events(Path(path), src.format)
        where = str(path)
    elif src.generator:
        make = resolve(src.generator, "source.generator")
        payloads = list(itertools.islice(make(GENERATED, seed), GENERATED))
        where = src.generator
    else:
        return None
    if not payloads:
        raise ValueError(f"{where}: no sample events")
    return payloads


def record_bytes(payload: Any, fmt: str) -> bytes:
    """A payload as the source's record format carries it (a text or bytes source's
    sample line is a JSON string; a ``RawLine`` is the record as it was)."""
    if isinstance(payload, RawLine):
        return bytes(payload)
    if fmt == "json":
        return orjson.dumps(payload)
    return payload.encode() if isinstance(payload, str) else orjson.dumps(payload)
