"""Keyed state in the knowledge base, committed with the input offsets it reflects.

A keyed operator's state lives in Redis, one hash per key group (``Keys.state``), not in a
replica's memory: its size is bounded by what Redis holds, and a resize moves no bytes —
the partition's new owner reads the groups the old owner committed. Kafka Streams and
quix-streams keep state in a local store with a changelog topic, which a new owner must
replay before it may process; with the state already shared, a move costs a task
boundary, not a restore.

A task serves a partition through a ``PartitionStore``. It opens at the partition's
committed offset and epoch (bumped by every commit), read in one snapshot with the
partition's watermarks; every later read (state, applied ids, the open windows) checks
both in the same script, so an attempt that another overtook (a retry, a zombie) reads
nothing newer than what it opened at and stops (``Fenced``) rather than compute other
values. Writes are buffered; at a checkpoint or the task's end one script applies every
write, the offset, the ids of the events applied (a repeat from upstream arrives at a new
offset: known by its id, kept ``APPLIED_KEEP_S``) and the watermarks, max-merged, if the
offset and epoch are still the ones last committed (taken at a cut, ``prepare``, applied
once the cut's outputs are delivered, ``apply``), with the counters of what the cut did.
So each event's effect on state is applied, and counted, once: state, offset, ids and
counts move together or not at all.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from elastic_sps.io.by_end import ByEnd
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

# Both scripts take their reads and writes in blocks, one command per block (a command
# per field would cost Redis a Lua call each: most of the scripts' time at saturation).
# A block: command, key index, count, then its ``count`` arguments; ``BLOCK`` arguments
# at most (Lua's unpack is bounded by its C stack).
BLOCK = 1000

# KEYS: committed, epochs, then the keys read; ARGV: partition, offset, epoch, then
# blocks: H = HMGET fields, Z = ZMSCORE members. -1: fenced.
_READ = """
if (redis.call('HGET', KEYS[1], ARGV[1]) or '') ~= ARGV[2] then return -1 end
if (redis.call('HGET', KEYS[2], ARGV[1]) or '0') ~= ARGV[3] then return -1 end
local out = {}
local i = 4
while i <= #ARGV do
  local k, last = KEYS[tonumber(ARGV[i + 1])], i + 2 + tonumber(ARGV[i + 2])
  local cmd = 'HMGET'
  if ARGV[i] == 'Z' then cmd = 'ZMSCORE' end
  local found = redis.call(cmd, k, unpack(ARGV, i + 3, last))
  for j = 1, last - i - 2 do out[#out + 1] = found[j] end
  i = last + 1
end
return out
"""

# KEYS: committed, epochs, the window-ends index; ARGV: partition, offset, epoch. The
# index's members and scores, or -1: fenced.
_INDEX = """
if (redis.call('HGET', KEYS[1], ARGV[1]) or '') ~= ARGV[2] then return -1 end
if (redis.call('HGET', KEYS[2], ARGV[1]) or '0') ~= ARGV[3] then return -1 end
return redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES')
"""

# ARGV: partition, offset, epoch, next offset, now, forget-before, then blocks: S HSET
# field value pairs, D HDEL fields, Z ZADD score member pairs, R ZREM members, I ZADD
# members at now (the ids applied), M field value pairs each set if above the field's
# number, H HINCRBY field n pairs (counters). 0: fenced, nothing applied.
_COMMIT = """
if (redis.call('HGET', KEYS[1], ARGV[1]) or '') ~= ARGV[2] then return 0 end
if (redis.call('HGET', KEYS[2], ARGV[1]) or '0') ~= ARGV[3] then return 0 end
local applied = nil
local i = 7
while i <= #ARGV do
  local op, k = ARGV[i], KEYS[tonumber(ARGV[i + 1])]
  local first, last = i + 3, i + 2 + tonumber(ARGV[i + 2])
  if op == 'S' then redis.call('HSET', k, unpack(ARGV, first, last))
  elseif op == 'D' then redis.call('HDEL', k, unpack(ARGV, first, last))
  elseif op == 'Z' then redis.call('ZADD', k, unpack(ARGV, first, last))
  elseif op == 'R' then redis.call('ZREM', k, unpack(ARGV, first, last))
  elseif op == 'I' then
    local scored = {}
    for j = first, last do scored[#scored + 1] = ARGV[5]; scored[#scored + 1] = ARGV[j] end
    redis.call('ZADD', k, unpack(scored))
    applied = k
  elseif op == 'H' then
    for j = first, last, 2 do redis.call('HINCRBY', k, ARGV[j], ARGV[j + 1]) end
  elseif op == 'M' then
    for j = first, last, 2 do
      local cur = redis.call('HGET', k, ARGV[j])
      if (not cur) or tonumber(ARGV[j + 1]) > tonumber(cur) then
        redis.call('HSET', k, ARGV[j], ARGV[j + 1])
      end
    end
  end
  i = last + 1
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


# asked twice per window per event; typed: 60 and 60.0 are different fields
@functools.lru_cache(maxsize=1 << 14, typed=True)
def window_field(key: str, start: float | None) -> str:
    """A window's field in its group's hash: the key's sessions (``start`` None), or the
    window of ``key`` starting at ``start``."""
    return orjson.dumps([key] if start is None else [key, start]).decode()


class _Args:
    """A script's KEYS and ARGV (after its fixed head), each key listed once."""

    def __init__(self, *keys: str) -> None:
        self.keys = list(keys)
        self.index = {k: i + 1 for i, k in enumerate(keys)}
        self.args: list[Any] = []

    def ref(self, key: str) -> str:
        if key not in self.index:
            self.keys.append(key)
            self.index[key] = len(self.keys)
        return str(self.index[key])

    def block(self, command: str, key: str, items: list[Any], first: bool = False) -> None:
        """``items`` as blocks of ``command`` on ``key`` (pairs stay whole: ``BLOCK`` is
        even); ``first``: before the blocks already added."""
        ref = self.ref(key)
        added: list[Any] = []
        for k in range(0, len(items), BLOCK):
            chunk = items[k : k + BLOCK]
            added += [command, ref, len(chunk), *chunk]
        self.args = added + self.args if first else self.args + added


@dataclass(frozen=True)
class Commit:
    """A partition's writes at a cut (``PartitionStore.prepare``), applied later."""

    args: _Args
    next_offset: int
    at: float

    def count(self, key: str, counts: Mapping[str, int]) -> None:
        """Counters that go up with the commit, and only if it is applied: what the cut's
        events did is counted once, by the attempt whose effects stand. Before the state
        writes: a script that fails keeps what it wrote, and a counter that cannot go up
        must fail it before any of them."""
        items = [x for name, n in counts.items() if n for x in (name, n)]
        if items:
            self.args.block("H", key, items, first=True)


class PartitionStore:
    """One partition's keyed state as one task sees it (see the module docstring)."""

    def __init__(self, redis: Any, keys: Keys, operator: str, partition: int) -> None:
        self.r, self.keys, self.op, self.partition = redis, keys, operator, partition
        # one snapshot (MULTI): the marks are those of the offset and epoch opened at
        pipe = redis.pipeline(transaction=True)
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
        self._by_end: ByEnd | None = None  # built with ``_index``
        self._seen: dict[str, bool] = {}  # event id -> applied (before or in this task)
        self._applied_now: list[str] = []
        self._read = redis.register_script(_READ)
        self._read_index = redis.register_script(_INDEX)
        self._commit = redis.register_script(_COMMIT)
        self.lock = threading.Lock()  # a commit applied from another thread (``apply``)

    # -- reads, fenced ----------------------------------------------------------------------
    def _hash(self, kind: str, group: int) -> str:
        """``s``: the operator's state; ``s:<member>``: a keyed chain member's
        (``stateful.MemberStates``); ``w``: windows."""
        if kind == "w":
            return self.keys.windows(self.op, group)
        if kind == "s":
            return self.keys.state(self.op, group)
        return self.keys.member_state(self.op, kind[len("s:") :], group)

    def _opened_at(self) -> list[Any]:
        """What every fenced read checks: the partition, its offset and epoch at open."""
        return [self.partition, "" if self.committed is None else self.committed, self.epoch]

    def _fetch(self, values: list[tuple[str, int, str]], ids: list[str]) -> None:
        a = _Args(self.keys.committed(self.op), self.keys.epochs(self.op))
        by_hash: dict[str, list[tuple[str, int, str]]] = {}
        for k in values:
            by_hash.setdefault(self._hash(k[0], k[1]), []).append(k)
        for name, wanted in by_hash.items():
            a.block("H", name, [field for _, _, field in wanted])
        if ids:
            a.block("Z", self.keys.applied(self.op, self.partition), ids)
        with self.lock:
            found = self._read(keys=a.keys, args=self._opened_at() + a.args)
        if found == -1:
            self._fenced()
        ordered = [k for wanted in by_hash.values() for k in wanted]
        for k, raw in zip(ordered, found[: len(ordered)], strict=True):
            self._values[k] = MISSING if raw is None else orjson.loads(raw)
        for event_id, score in zip(ids, found[len(ordered) :], strict=True):
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
        if end is not None and self._by_end is not None:
            self._by_end.push(end, group, field)

    def _fenced(self) -> None:
        raise Fenced(f"{self.op}[{self.partition}] was committed by another attempt")

    def _open(self) -> dict[tuple[int, str], float]:
        """The committed open windows by end, read once a task, fenced as every read."""
        if self._index is None:
            a = _Args(self.keys.committed(self.op), self.keys.epochs(self.op))
            a.ref(self.keys.window_ends(self.op, self.partition))
            with self.lock:
                found = self._read_index(keys=a.keys, args=self._opened_at())
            if found == -1:
                self._fenced()
            self._index = {}
            for member, end in zip(found[::2], found[1::2], strict=True):
                group, field = orjson.loads(member)
                self._index[(int(group), str(field))] = float(end)
        return self._index

    def _ordered(self) -> ByEnd:
        if self._by_end is None:
            entries = [(e, g, f) for (g, f), e in self._open().items()]
            entries += [(e, g, f) for (g, f), e in self._ends.items() if e is not None]
            self._by_end = ByEnd(self.end_of, entries)
        return self._by_end

    def end_of(self, group: int, field: str) -> float | None:
        if (group, field) in self._ends:
            return self._ends[(group, field)]
        return self._open().get((group, field))

    def oldest_end(self) -> float | None:
        """The end of the oldest open window (None: none is open)."""
        return self._ordered().oldest()

    def due(self, until: float) -> list[tuple[int, str, float]]:
        """The open windows ending at or before ``until``, by end (taken off the index:
        the caller closes each)."""
        return self._ordered().take_due(until)

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
        partition is still at the offset and epoch this store last committed; False:
        another attempt got there first (nothing applied)."""
        return self.apply(self.prepare(next_offset, owner))

    def apply(self, c: Commit) -> bool:
        """``prepare``'s writes (its cut's outputs delivered), as ``commit``. Under the
        store's lock: a fenced read on the serving thread sees the offset and epoch
        before the commit or after it, never a mix."""
        with self.lock:
            head: list[Any] = [self.partition, "" if self.committed is None else self.committed]
            head += [self.epoch, c.next_offset, repr(c.at), repr(c.at - APPLIED_KEEP_S)]
            done = int(self._commit(keys=c.args.keys, args=head + c.args.args)) == 1
            if done:
                self.committed, self.epoch = c.next_offset, self.epoch + 1
        return done

    def prepare(self, next_offset: int, owner: int) -> Commit:
        """Every buffered write, the ids applied and ``next_offset``, taken off the
        buffers now (a cut; the task serves on and buffers anew), for ``apply``."""
        a = _Args(self.keys.committed(self.op), self.keys.epochs(self.op))
        now = time.time()
        self._write_values(a)
        self._write_ends(a)
        marks: dict[str, list[str]] = {"M": [], "S": []}
        for op, field, value in marks_args(self.watermark, self.marks, self._marks_dirty):
            marks[op] += [field, value]
        for op, items in marks.items():
            if items:
                a.block(op, self.keys.watermarks(self.op, self.partition), items)
        if self._applied_now:
            a.block("I", self.keys.applied(self.op, self.partition), self._applied_now)
        a.block("S", self.keys.handover(self.op), [str(self.partition), f"{owner} {now!r}"])
        if self._index is None and self._ends:  # read before it holds ends not yet applied
            self._open()
        self._apply_index()
        self._dirty.clear()
        self._marks_dirty.clear()
        self._applied_now.clear()
        return Commit(a, next_offset, now)

    def _write_values(self, a: _Args) -> None:
        """The buffered state writes, as blocks of HSET and HDEL per hash."""
        sets: dict[str, list[Any]] = {}
        deletes: dict[str, list[str]] = {}
        for (kind, group, field), value in self._dirty.items():
            name = self._hash(kind, group)
            if value is _DELETED:
                deletes.setdefault(name, []).append(field)
            else:
                sets.setdefault(name, []).extend((field, orjson.dumps(value)))
        for name, items in sets.items():
            a.block("S", name, items)
        for name, fields in deletes.items():
            a.block("D", name, fields)

    def _write_ends(self, a: _Args) -> None:
        """The windows opened (their ends) and closed since the last commit."""
        added: list[Any] = []
        removed: list[bytes] = []
        for (group, field), end in self._ends.items():
            member = orjson.dumps([group, field])
            if end is None:
                removed.append(member)
            else:
                added += [end, member]
        key = self.keys.window_ends(self.op, self.partition)
        if added:
            a.block("Z", key, added)
        if removed:
            a.block("R", key, removed)

    def _apply_index(self) -> None:
        if self._index is not None:
            for k, end in self._ends.items():
                if end is None:
                    self._index.pop(k, None)
                else:
                    self._index[k] = end
        self._ends.clear()
