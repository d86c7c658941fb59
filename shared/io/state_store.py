"""Keyed state in the knowledge base, committed with the input offsets it reflects.

A keyed operator's state lives in Redis, one hash per key group (``Keys.state``), not in a
replica's memory: its size is bounded by what Redis holds, and a resize moves no bytes —
the partition's new owner reads the groups the old owner committed. Kafka Streams and
quix-streams keep state in a local store with a changelog topic, which a new owner must
replay before it may process; with the state already shared, a move costs a micro-batch
boundary, not a restore.

A task serves a partition through a ``PartitionStore``: reads go through a cache, writes
are buffered, and at the end of the task one Lua script (atomic in Redis) applies every
write *and* sets the partition's processed-up-to offset, if that offset is still the one
the task started from (a fence: a retried or zombie task whose range was already committed
applies nothing). So each event's effect on state is applied exactly once, whatever
crashes: state and offset move together or not at all.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import orjson

from shared.io.knowledge_base import Keys

MISSING: Any = object()
_DELETED: Any = object()

_COMMIT = """
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if (cur or '') ~= ARGV[2] then return 0 end
local i = 4
while i <= #ARGV do
  local op, k = ARGV[i], KEYS[tonumber(ARGV[i + 1])]
  if op == 'S' then redis.call('HSET', k, ARGV[i + 2], ARGV[i + 3])
  elseif op == 'D' then redis.call('HDEL', k, ARGV[i + 2])
  elseif op == 'Z' then redis.call('ZADD', k, ARGV[i + 3], ARGV[i + 2])
  elseif op == 'R' then redis.call('ZREM', k, ARGV[i + 2]) end
  i = i + 4
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
"""

WATERMARK_FIELD = "@"  # the partition's own watermark, kept beside its inputs


def _dump(value: Any) -> bytes:
    return orjson.dumps(value)


def window_field(key: str, start: float | None) -> str:
    """A window's field in its group's hash: the key's sessions (``start`` None), or the
    window of ``key`` starting at ``start``."""
    return orjson.dumps([key] if start is None else [key, start]).decode()


class PartitionStore:
    """One partition's keyed state as one task sees it (see the module docstring)."""

    def __init__(self, redis: Any, keys: Keys, operator: str, partition: int) -> None:
        self.r, self.keys, self.op, self.partition = redis, keys, operator, partition
        pipe = redis.pipeline(transaction=False)
        pipe.hget(keys.committed(operator), str(partition))
        pipe.hgetall(keys.watermarks(operator, partition))
        pipe.hget(keys.handover(operator), str(partition))
        committed, marks, handover = pipe.execute()
        self.committed: int | None = int(committed) if committed is not None else None
        # who committed the partition last, and when (read here: one round trip at open)
        self.handover: tuple[int, float] | None = None
        if handover is not None:
            owner, at = (handover.decode() if isinstance(handover, bytes) else handover).split()
            self.handover = (int(owner), float(at))
        self.inputs: dict[str, tuple[float, float]] = {}
        self.watermark: float | None = None
        for k, v in marks.items():
            name = k.decode() if isinstance(k, bytes) else str(k)
            if name == WATERMARK_FIELD:
                self.watermark = float(v)
            else:
                t, seen = orjson.loads(v)
                self.inputs[name] = (float(t), float(seen))
        self._marks_dirty: set[str] = set()
        self._values: dict[tuple[str, int, str], Any] = {}  # (kind, group, field) -> value
        self._dirty: dict[tuple[str, int, str], Any] = {}
        self._ends: dict[tuple[int, str], float | None] = {}  # window end, None: removed

    # -- values: per-key state ("s") and window accumulators ("w") ------------------------
    def _hash(self, kind: str, group: int) -> str:
        if kind == "s":
            return self.keys.state(self.op, group)
        return self.keys.windows(self.op, group)

    def get(self, kind: str, group: int, field: str) -> Any:
        k = (kind, group, field)
        if k not in self._values:
            raw = self.r.hget(self._hash(kind, group), field)
            self._values[k] = MISSING if raw is None else orjson.loads(raw)
        return self._values[k]

    def prefetch(self, wanted: list[tuple[str, int, str]]) -> None:
        """Read what ``wanted`` (kind, group, field) names and the cache lacks in one round
        trip (a task's events, read per event, cost a round trip each: 5 x the CPU per
        event of the same operator unkeyed, ``benchmarks/bench_state.py``)."""
        missing: dict[tuple[str, int], list[str]] = {}
        for kind, group, field in wanted:
            if (kind, group, field) not in self._values:
                fields = missing.setdefault((kind, group), [])
                if field not in fields:
                    fields.append(field)
        if not missing:
            return
        pipe = self.r.pipeline(transaction=False)
        for (kind, group), fields in missing.items():
            pipe.hmget(self._hash(kind, group), fields)
        for ((kind, group), fields), values in zip(missing.items(), pipe.execute(), strict=True):
            for field, raw in zip(fields, values, strict=True):
                self._values[(kind, group, field)] = MISSING if raw is None else orjson.loads(raw)

    def put(self, kind: str, group: int, field: str, value: Any) -> None:
        self._values[(kind, group, field)] = value
        self._dirty[(kind, group, field)] = value

    def delete(self, kind: str, group: int, field: str) -> None:
        self._values[(kind, group, field)] = MISSING
        self._dirty[(kind, group, field)] = _DELETED

    # -- windows: which are open, by end --------------------------------------------------
    def set_end(self, group: int, field: str, end: float | None) -> None:
        """A window's end (None: it closed or merged away)."""
        self._ends[(group, field)] = end

    def due(self, until: float) -> list[tuple[int, str, float]]:
        """The open windows ending at or before ``until``, by end."""
        out = {}
        for member, end in self.r.zrangebyscore(
            self.keys.window_ends(self.op, self.partition), "-inf", until, withscores=True
        ):
            group, field = orjson.loads(member)
            out[(int(group), str(field))] = float(end)
        for k, end in self._ends.items():
            if end is None or end > until:
                out.pop(k, None)
            else:
                out[k] = end
        return sorted(((g, f, e) for (g, f), e in out.items()), key=lambda x: (x[2], x[0], x[1]))

    # -- the watermark's inputs -----------------------------------------------------------
    def see_input(self, name: str, event_time: float, wall: float) -> None:
        latest = max(event_time, self.inputs.get(name, (event_time, 0.0))[0])
        self.inputs[name] = (latest, wall)
        self._marks_dirty.add(name)

    def advance_watermark(self, value: float | None) -> float | None:
        """The partition's watermark never goes back (a fired window stays fired)."""
        if value is not None and (self.watermark is None or value > self.watermark):
            self.watermark = value
            self._marks_dirty.add(WATERMARK_FIELD)
        return self.watermark

    @property
    def dirty(self) -> bool:
        """Whether anything waits to be committed (a window fired without new events)."""
        return bool(self._dirty or self._ends or self._marks_dirty)

    # -- commit ---------------------------------------------------------------------------
    def commit(self, next_offset: int, owner: int) -> bool:
        """Every buffered write and ``next_offset`` at once, if the partition is still at
        the offset this store opened at; False: another task got there first (nothing
        applied)."""
        keys: list[str] = [self.keys.committed(self.op)]
        index: dict[str, int] = {}

        def ref(k: str) -> str:
            if k not in index:
                keys.append(k)
                index[k] = len(keys)
            return str(index[k])

        args: list[Any] = [self.partition, "" if self.committed is None else self.committed]
        args.append(next_offset)
        for (kind, group, field), value in self._dirty.items():
            h = ref(self._hash(kind, group))
            args += ["D", h, field, ""] if value is _DELETED else ["S", h, field, _dump(value)]
        ends = ref(self.keys.window_ends(self.op, self.partition))
        for (group, field), end in self._ends.items():
            member = orjson.dumps([group, field])
            args += ["R", ends, member, ""] if end is None else ["Z", ends, member, end]
        marks = ref(self.keys.watermarks(self.op, self.partition))
        for name in sorted(self._marks_dirty):
            value = self.watermark if name == WATERMARK_FIELD else list(self.inputs[name])
            args += ["S", marks, name, _dump(value)]
        hand = ref(self.keys.handover(self.op))
        args += ["S", hand, str(self.partition), f"{owner} {time.time()!r}"]
        done = int(self.r.eval(_COMMIT, len(keys), *keys, *args)) == 1
        if done:
            self.committed = next_offset
            self._dirty.clear()
            self._ends.clear()
            self._marks_dirty.clear()
        return done


def state_bytes(redis: Any, keys: Keys, operator: str, groups: Iterable[int]) -> int:
    """What the key groups' state holds in Redis (``MEMORY USAGE`` of each hash)."""
    pipe = redis.pipeline(transaction=False)
    names = [keys.state(operator, g) for g in groups] + [keys.windows(operator, g) for g in groups]
    for name in names:
        pipe.memory_usage(name)
    return int(sum(v or 0 for v in pipe.execute()))
