"""Keyed state in the knowledge base, committed with the input offsets it reflects.

A keyed operator's state lives in Redis, one hash per key group (``Keys.state``), not in a
replica's memory: its size is bounded by what Redis holds, and a resize moves no bytes —
the partition's new owner reads the groups the old owner committed. Kafka Streams and
quix-streams keep state in a local store with a changelog topic, which a new owner must
replay before it may process; with the state already shared, a move costs a task
boundary, not a restore.

A task serves a partition through a ``PartitionStore``. It opens at the partition's
committed offset and epoch (bumped by every commit); every read checks both in the same
script, so an attempt that another overtook (a retry, a zombie) reads nothing newer than
what it opened at and stops (``Fenced``) rather than compute other values. Writes are
buffered; at the end of the task one script applies every write, the offset, the ids of
the events applied (a repeat from upstream arrives at a new offset: it is known by its
id, remembered ``APPLIED_KEEP_S``) and the watermarks, max-merged, if the offset and epoch
are still the ones the task opened at. So each event's effect on state is applied once:
state, offset and ids move together or not at all.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import orjson

from elastic_sps.io.knowledge_base import Keys
from elastic_sps.io.marks import WATERMARK_FIELD, marks_args, read_marks, text
from elastic_sps.io.watermarks import InputMark

MISSING: Any = object()
_DELETED: Any = object()
APPLIED_KEEP_S = 600.0  # how long a partition remembers an applied id (a repeat's window)
__all__ = [
    "MISSING",
    "WATERMARK_FIELD",
    "Fenced",
    "PartitionStore",
    "member_kind",
    "window_field",
]

# KEYS: committed, epochs, then the keys read; ARGV: partition, offset, epoch, then
# (op, key index, field) triples: H = HGET, Z = ZSCORE. -1: fenced.
_READ = """
if (redis.call('HGET', KEYS[1], ARGV[1]) or '') ~= ARGV[2] then return -1 end
if (redis.call('HGET', KEYS[2], ARGV[1]) or '0') ~= ARGV[3] then return -1 end
local out = {}
for i = 4, #ARGV, 3 do
  local k = KEYS[tonumber(ARGV[i + 1])]
  if ARGV[i] == 'H' then out[#out + 1] = redis.call('HGET', k, ARGV[i + 2]) or false
  else out[#out + 1] = redis.call('ZSCORE', k, ARGV[i + 2]) or false end
end
return out
"""

# ARGV: partition, offset, epoch, next offset, now, forget-before, then (op, key, a, b):
# S HSET, D HDEL, Z ZADD, R ZREM, M HSET if the number is above the field's, I an
# applied id. 0: fenced, nothing applied.
_COMMIT = """
if (redis.call('HGET', KEYS[1], ARGV[1]) or '') ~= ARGV[2] then return 0 end
if (redis.call('HGET', KEYS[2], ARGV[1]) or '0') ~= ARGV[3] then return 0 end
local applied = nil
for i = 7, #ARGV, 4 do
  local op, k, a, b = ARGV[i], KEYS[tonumber(ARGV[i + 1])], ARGV[i + 2], ARGV[i + 3]
  if op == 'S' then redis.call('HSET', k, a, b)
  elseif op == 'D' then redis.call('HDEL', k, a)
  elseif op == 'Z' then redis.call('ZADD', k, b, a)
  elseif op == 'R' then redis.call('ZREM', k, a)
  elseif op == 'I' then redis.call('ZADD', k, ARGV[5], a); applied = k
  elseif op == 'M' then
    local cur = redis.call('HGET', k, a)
    if (not cur) or tonumber(b) > tonumber(cur) then redis.call('HSET', k, a, b) end
  end
end
if applied then redis.call('ZREMRANGEBYSCORE', applied, '-inf', ARGV[6]) end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[4])
redis.call('HSET', KEYS[2], ARGV[1], tonumber(ARGV[3]) + 1)
return 1
"""


class Fenced(RuntimeError):
    """Another attempt committed this partition since this one opened: apply and emit
    nothing more (the other's effects stand)."""


def member_kind(member: str) -> str:
    """The store kind of a keyed chain member's state (beside its head's ``s``)."""
    return f"s:{member}"


def window_field(key: str, start: float | None) -> str:
    """A window's field in its group's hash: the key's sessions (``start`` None), or the
    window of ``key`` starting at ``start``."""
    return orjson.dumps([key] if start is None else [key, start]).decode()


class _Args:
    """A script's KEYS and ARGV, each key listed once."""

    def __init__(self, *keys: str) -> None:
        self.keys = list(keys)
        self.index = {k: i + 1 for i, k in enumerate(keys)}
        self.args: list[Any] = []

    def ref(self, key: str) -> str:
        if key not in self.index:
            self.keys.append(key)
            self.index[key] = len(self.keys)
        return str(self.index[key])


class PartitionStore:
    """One partition's keyed state as one task sees it (see the module docstring)."""

    def __init__(self, redis: Any, keys: Keys, operator: str, partition: int) -> None:
        self.r, self.keys, self.op, self.partition = redis, keys, operator, partition
        pipe = redis.pipeline(transaction=False)
        pipe.hget(keys.committed(operator), str(partition))
        pipe.hget(keys.epochs(operator), str(partition))
        pipe.hgetall(keys.watermarks(operator, partition))
        pipe.hget(keys.handover(operator), str(partition))
        committed, epoch, marks, handover = pipe.execute()
        self.committed: int | None = int(committed) if committed is not None else None
        self.epoch = int(epoch) if epoch is not None else 0
        # who committed the partition last, and when (read here: one round trip at open)
        self.handover: tuple[int, float] | None = None
        if handover is not None:
            owner, at = text(handover).split()
            self.handover = (int(owner), float(at))
        self.watermark, self.marks = read_marks(marks)
        self._marks_dirty: set[str] = set()
        self._values: dict[tuple[str, int, str], Any] = {}  # (kind, group, field) -> value
        self._dirty: dict[tuple[str, int, str], Any] = {}
        self._ends: dict[tuple[int, str], float | None] = {}  # window end, None: removed
        self._index: dict[tuple[int, str], float] | None = None  # open windows, read once
        self._seen: dict[str, bool] = {}  # event id -> applied (before or in this task)
        self._applied_now: list[str] = []
        self._read = redis.register_script(_READ)
        self._commit = redis.register_script(_COMMIT)

    # -- reads, fenced ----------------------------------------------------------------------
    def _hash(self, kind: str, group: int) -> str:
        """``s``: the operator's state; ``s:<member>``: a keyed chain member's
        (``stateful.MemberStates``); ``w``: windows."""
        if kind == "w":
            return self.keys.windows(self.op, group)
        if kind == "s":
            return self.keys.state(self.op, group)
        return self.keys.member_state(self.op, kind[len("s:") :], group)

    def _fetch(self, values: list[tuple[str, int, str]], ids: list[str]) -> None:
        a = _Args(self.keys.committed(self.op), self.keys.epochs(self.op))
        args: list[Any] = [self.partition, "" if self.committed is None else self.committed]
        args.append(self.epoch)
        for kind, group, field in values:
            args += ["H", a.ref(self._hash(kind, group)), field]
        for event_id in ids:
            args += ["Z", a.ref(self.keys.applied(self.op, self.partition)), event_id]
        found = self._read(keys=a.keys, args=args)
        if found == -1:
            raise Fenced(f"{self.op}[{self.partition}] was committed by another attempt")
        for k, raw in zip(values, found[: len(values)], strict=True):
            self._values[k] = MISSING if raw is None else orjson.loads(raw)
        for event_id, score in zip(ids, found[len(values) :], strict=True):
            self._seen[event_id] = score is not None

    def get(self, kind: str, group: int, field: str) -> Any:
        k = (kind, group, field)
        if k not in self._values:
            self._fetch([k], [])
        return self._values[k]

    def prefetch(self, wanted: list[tuple[str, int, str]], ids: Iterable[str] = ()) -> None:
        """What ``wanted`` (kind, group, field) names and whether ``ids`` were applied,
        for what the cache lacks, in one round trip."""
        values = list(dict.fromkeys(k for k in wanted if k not in self._values))
        unknown = list(dict.fromkeys(i for i in ids if i not in self._seen))
        if values or unknown:
            self._fetch(values, unknown)

    def put(self, kind: str, group: int, field: str, value: Any) -> None:
        self._values[(kind, group, field)] = value
        self._dirty[(kind, group, field)] = value

    def delete(self, kind: str, group: int, field: str) -> None:
        self._values[(kind, group, field)] = MISSING
        self._dirty[(kind, group, field)] = _DELETED

    # -- the ids applied --------------------------------------------------------------------
    def applied(self, event_id: str) -> bool:
        if event_id not in self._seen:
            self._fetch([], [event_id])
        return self._seen[event_id]

    def mark_applied(self, event_id: str) -> None:
        self._seen[event_id] = True
        self._applied_now.append(event_id)

    # -- windows: which are open, by end ----------------------------------------------------
    def set_end(self, group: int, field: str, end: float | None) -> None:
        """A window's end (None: it closed or merged away)."""
        self._ends[(group, field)] = end

    def _open(self) -> dict[tuple[int, str], float]:
        """The committed open windows by end, read once a task."""
        if self._index is None:
            self._index = {}
            key = self.keys.window_ends(self.op, self.partition)
            for member, end in self.r.zrange(key, 0, -1, withscores=True):
                group, field = orjson.loads(member)
                self._index[(int(group), str(field))] = float(end)
        return self._index

    def end_of(self, group: int, field: str) -> float | None:
        if (group, field) in self._ends:
            return self._ends[(group, field)]
        return self._open().get((group, field))

    def oldest_end(self) -> float | None:
        """The end of the oldest open window (None: none is open)."""
        ends = {**self._open(), **self._ends}
        return min((e for e in ends.values() if e is not None), default=None)

    def due(self, until: float) -> list[tuple[int, str, float]]:
        """The open windows ending at or before ``until``, by end."""
        out = {k: e for k, e in self._open().items() if e <= until}
        for k, end in self._ends.items():
            if end is None or end > until:
                out.pop(k, None)
            else:
                out[k] = end
        return sorted(((g, f, e) for (g, f), e in out.items()), key=lambda x: (x[2], x[0], x[1]))

    # -- watermarks -------------------------------------------------------------------------
    def note_marks(
        self, watermark: float | None, marks: dict[str, InputMark], changed: set[str]
    ) -> None:
        self.watermark, self.marks = watermark, marks
        self._marks_dirty |= changed

    @property
    def dirty(self) -> bool:
        """Whether anything waits to be committed (a window fired without new events)."""
        return bool(self._dirty or self._ends or self._marks_dirty or self._applied_now)

    # -- commit -----------------------------------------------------------------------------
    def commit(self, next_offset: int, owner: int) -> bool:
        """Every buffered write, the ids applied and ``next_offset`` at once, if the
        partition is still at the offset and epoch this store opened at; False: another
        attempt got there first (nothing applied)."""
        a = _Args(self.keys.committed(self.op), self.keys.epochs(self.op))
        now = time.time()
        args: list[Any] = [self.partition, "" if self.committed is None else self.committed]
        args += [self.epoch, next_offset, repr(now), repr(now - APPLIED_KEEP_S)]
        for (kind, group, field), value in self._dirty.items():
            h = a.ref(self._hash(kind, group))
            args += (
                ["D", h, field, ""] if value is _DELETED else ["S", h, field, orjson.dumps(value)]
            )
        ends = a.ref(self.keys.window_ends(self.op, self.partition))
        for (group, field), end in self._ends.items():
            member = orjson.dumps([group, field])
            args += ["R", ends, member, ""] if end is None else ["Z", ends, member, end]
        marks = a.ref(self.keys.watermarks(self.op, self.partition))
        for op, field, value in marks_args(self.watermark, self.marks, self._marks_dirty):
            args += [op, marks, field, value]
        ids = a.ref(self.keys.applied(self.op, self.partition))
        for event_id in self._applied_now:
            args += ["I", ids, event_id, ""]
        hand = a.ref(self.keys.handover(self.op))
        args += ["S", hand, str(self.partition), f"{owner} {now!r}"]
        done = int(self._commit(keys=a.keys, args=args)) == 1
        if done:
            self.committed, self.epoch = next_offset, self.epoch + 1
            self._apply_index()
            self._dirty.clear()
            self._marks_dirty.clear()
            self._applied_now.clear()
        return done

    def _apply_index(self) -> None:
        if self._index is not None:
            for k, end in self._ends.items():
                if end is None:
                    self._index.pop(k, None)
                else:
                    self._index[k] = end
        self._ends.clear()


def state_bytes(
    redis: Any, keys: Keys, operator: str, groups: Iterable[int], members: Iterable[str] = ()
) -> int:
    """What the key groups' state holds in Redis (``MEMORY USAGE`` of each hash), a keyed
    chain's ``members``' beside its head's."""
    pipe = redis.pipeline(transaction=False)
    groups = list(groups)
    names = [keys.state(operator, g) for g in groups] + [keys.windows(operator, g) for g in groups]
    names += [keys.member_state(operator, m, g) for m in members for g in groups]
    for name in names:
        pipe.memory_usage(name)
    return int(sum(v or 0 for v in pipe.execute()))
