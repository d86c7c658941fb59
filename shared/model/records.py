"""A record on the user's input topic as an event: the topology's ``source:`` section.

```yaml
source:
  topics: [orders]           # default: the ingress topic (SPS_TOPICS__INGRESS)
  format: json               # json | text | bytes
  id: offset                 # offset (topic/partition/offset) | field:<dotted.path>
  time: timestamp            # event time: the record timestamp | field:<path> (epoch
                             # s/ms, ISO 8601); latency always runs from the timestamp
  key: field:user.id         # the LAS key: a path into the payload (json only; the old
                             # form without field: is read too, with a warning)
```

The envelope (id, send time, payload) is internal: the ingress wraps every record it
admits. A record that cannot be decoded is a ``BadRecord``: the ingress dead-letters it
with the reason and goes on.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from elastic_sps.io.envelope import Envelope

FORMATS = ("json", "text", "bytes")


class BadRecord(ValueError):
    """A record the source cannot turn into an event; the message is the reason."""


@dataclass(frozen=True)
class SourceSpec:
    topics: tuple[str, ...] = ()
    format: str = "json"
    id: str = "offset"
    time: str = "timestamp"
    key: str = ""
    # for trying a pipeline: JSON lines of payloads, and a generator "pkg.mod:fn" (n, seed)
    sample_events: str = ""
    generator: str = ""
    _id_path: Paths = field(default=(), init=False, repr=False, compare=False)
    _time_path: Paths = field(default=(), init=False, repr=False, compare=False)
    _key_path: Paths = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ValueError(f"source.format must be one of {FORMATS}, got {self.format!r}")
        for name, value, plain in (("id", self.id, "offset"), ("time", self.time, "timestamp")):
            if value != plain and not value.startswith("field:"):
                raise ValueError(
                    f"source.{name} must be {plain!r} or 'field:<path>', got {value!r}"
                )
        if self.format != "json" and (self.id != "offset" or self.time != "timestamp" or self.key):
            raise ValueError("source: id, time and key fields need format: json")
        object.__setattr__(self, "_id_path", paths(self.id))
        object.__setattr__(self, "_time_path", paths(self.time))
        key = self.key if not self.key or self.key.startswith("field:") else f"field:{self.key}"
        object.__setattr__(self, "_key_path", paths(key))

    def warnings(self) -> list[str]:
        """What is read, but in a form kept only for old topologies."""
        if self.key and not self.key.startswith("field:"):
            return [
                f"source.key {self.key!r} is the old form of key: 'field:{self.key}' "
                "(read the same way; write it as operators' keys are written)"
            ]
        return []

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any] | None) -> SourceSpec:
        doc = dict(doc or {})
        topics = doc.pop("topics", doc.pop("topic", ()))
        if isinstance(topics, str):
            topics = (topics,)
        unknown = set(doc) - {"format", "id", "time", "key", "sample_events", "generator"}
        if unknown:
            raise ValueError(f"source: unknown keys {sorted(unknown)}")
        return cls(tuple(str(t) for t in topics), **{k: str(v) for k, v in doc.items()})

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"topics": list(self.topics)} if self.topics else {}
        for k in ("format", "id", "time", "key", "sample_events", "generator"):
            v = getattr(self, k)
            if v != getattr(SourceSpec, k):
                out[k] = v
        return out

    @property
    def _fields_used(self) -> bool:
        return bool(self._id_path or self._time_path or self.key)

    def keyed_by(self, key_field: str) -> SourceSpec:
        """The source with ``key_field`` as its LAS key when it names none (json only):
        the settings' ``SPS_KEY_FIELD``."""
        if self.key or not key_field or self.format != "json":
            return self
        return replace(self, key=key_field)

    def topic(self, default: str) -> str:
        """The topic the source's events are read from: its first, else ``default`` (the
        ingress topic)."""
        return self.topics[0] if self.topics else default

    def payload(self, raw: bytes | None) -> Any:
        if raw is None:
            raise BadRecord("empty record (no value)")
        if self.format == "bytes":
            return bytes(raw)
        if self.format == "text":
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise BadRecord(f"not UTF-8 text: {exc}") from None
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise BadRecord(f"not JSON: {exc}") from None

    def event(
        self,
        raw: bytes | None,
        topic: str,
        partition: int,
        offset: int,
        timestamp_ms: int | None,
        now: float,
    ) -> tuple[Envelope, str | None]:
        """The record as an event and its LAS key (None: unkeyed)."""
        payload = self.payload(raw)
        if self.format == "json" and not isinstance(payload, dict) and self._fields_used:
            raise BadRecord(
                f"a JSON {type(payload).__name__}, not an object: the source reads its "
                "id, time or key from fields"
            )
        if self._id_path:
            found = lookup_first(payload, self._id_path)
            if found is None:
                raise BadRecord(f"no event id at {self.id[len('field:') :]!r}")
            event_id = str(found)
        else:
            event_id = f"{topic}/{partition}/{offset}"
        # latency runs from the record's timestamp; windows go by the event's own time
        ts = timestamp_ms / 1000.0 if timestamp_ms and timestamp_ms > 0 else now
        evt = None
        if self._time_path:
            where = self.time[len("field:") :]
            evt = event_time(lookup_first(payload, self._time_path), where)
        key = lookup_first(payload, self._key_path) if self._key_path else None
        return Envelope(event_id, ts, "source", payload, evt=evt), key


Paths = tuple[tuple[str, ...], ...]


@functools.lru_cache(maxsize=1024)
def paths(spec: str) -> Paths:
    """``field:a.b|c.d``: the dotted paths to try in turn (records of several shapes on
    one topic, as Nexmark's persons, auctions and bids). Cached: an operator's key paths
    are asked for per event (``Operator.key_path``)."""
    if not spec.startswith("field:"):
        return ()
    return tuple(tuple(alt.split(".")) for alt in spec[len("field:") :].split("|"))


def lookup_first(payload: Any, paths: Paths) -> str | None:
    """The scalar at the first of ``paths`` the payload has."""
    for path in paths:
        found = lookup(payload, path)
        if found is not None:
            return found
    return None


def lookup(payload: Any, path: tuple[str, ...]) -> str | None:
    """The scalar at ``path`` as text (None: absent, or not a scalar)."""
    cur = payload
    for part in path:
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            return None
    return None if cur is None or isinstance(cur, dict | list) else str(cur)


def event_time(value: str | None, where: str) -> float:
    """Epoch seconds from epoch seconds, epoch milliseconds (> 1e11) or ISO 8601."""
    if value is None:
        raise BadRecord(f"no event time at {where!r}")
    try:
        t = float(value)
        return t / 1000.0 if t > 1e11 else t
    except ValueError:
        pass
    try:
        stamp = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise BadRecord(
            f"event time at {where!r} is neither a number nor ISO 8601: {value!r}"
        ) from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.UTC)
    return stamp.timestamp()
