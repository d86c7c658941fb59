"""A replica slot's part in the watermark protocol (``elastic_sps.io.watermarks``): the
partition's valve, fed by the declarations read from its partition, and its own
declaration sent to every partition of every successor, in line with its events (the
same producer, after the outputs it follows)."""

from __future__ import annotations

import copy
import time
from typing import Any

from elastic_sps.io.marks import marks_args, merge_marks, read_marks
from elastic_sps.io.watermarks import DECLARE_EVERY_S, Declaration, InputMark


class Marks:
    """A stateless partition's watermark and inputs' marks (a keyed one's live in its
    ``PartitionStore``), read at the slot's first declaration, merged back at publish."""

    def __init__(self, redis: Any, key: str) -> None:
        self.key = key
        self.watermark, self.marks = read_marks(redis.hgetall(key))
        self.changed: set[str] = set()

    def note_marks(
        self, watermark: float | None, marks: dict[str, InputMark], changed: set[str]
    ) -> None:
        self.watermark, self.marks = watermark, marks
        self.changed |= changed

    def cut(self) -> Marks:
        """What they are now, for a checkpoint to write; these go on from here."""
        taken = copy.copy(self)
        taken.marks, taken.changed, self.changed = dict(self.marks), self.changed, set()
        return taken

    def write(self, redis: Any, pipe: Any) -> None:
        """Into ``pipe``; what changed stays noted (the watermarks are max-merged and
        the idle flags set to their current values, so a second write of them is
        harmless, and a pipeline that fails must not have dropped them)."""
        merge_marks(redis, pipe, self.key, marks_args(self.watermark, self.marks, self.changed))


class Declarer:
    """Sends a slot's declaration when it changed: at most every ``DECLARE_EVERY_S``
    while the task serves (one held back goes when its interval has passed, with the
    next record or without: ``send_held``), at once when it wakes from idle, and at the
    task's end. What successors last heard is not known at the task's start: its first
    one always goes."""

    def __init__(self, producer: Any, targets: list[tuple[str, int]]) -> None:
        self.producer, self.targets = producer, targets
        self.last: Declaration | None = None
        self.sent_at = float("-inf")
        self.pending: Declaration | None = None

    def offer(self, d: Declaration, force: bool = False) -> None:
        if d == self.last:
            self.pending = None
            return
        self.pending = d
        now = time.monotonic()
        woke = self.last is not None and self.last.idle and not d.idle
        if force or woke or now - self.sent_at >= DECLARE_EVERY_S:
            body = d.encode()
            for topic, partition in self.targets:
                self.producer.produce(topic, body, partition=partition)
            self.last, self.pending, self.sent_at = d, None, now

    def held_until(self) -> float | None:
        """When the held-back declaration may go (monotonic); None: nothing held."""
        return None if self.pending is None else self.sent_at + DECLARE_EVERY_S

    def send_held(self) -> None:
        """The held-back declaration, if its interval has passed: a sender whose records
        stopped must not keep its successors' windows waiting for its task's end."""
        if self.pending is not None:
            self.offer(self.pending)

    def flush(self) -> None:
        if self.pending is not None:
            self.offer(self.pending, force=True)
