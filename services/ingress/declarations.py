"""The ingress as the reader of the source's partitions declares their watermarks
(``elastic_sps.io.watermarks``) to every partition of every entry operator, through the
producer that carries their events, so each declaration follows the events it covers.

A partition's watermark is the latest event time read from it (records the ingress could
not read, and events it sheds, move it too: they are read). It is idle once the reader's
position has sat at the partition's end for ``idle_s`` (``SourceClock``); when a
partition is read again, every idle one is declared active, at its last watermark,
before the first new event.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import TopicPartition

from elastic_sps.io.watermarks import DECLARE_EVERY_S, Declaration, SourceClock


class SourceDeclarations:
    def __init__(self, consumer: Any, topics: list[str], idle_s: float) -> None:
        self.consumer, self.topics, self.idle_s = consumer, sorted(topics), idle_s
        self.index: dict[tuple[str, int], int] = {}
        self.clocks: dict[int, SourceClock] = {}
        self.of = 0
        self.last: dict[int, Declaration] = {}
        self.sent_at = float("-inf")
        self._number()

    def _number(self) -> None:
        """One number per source partition, across topics (again when a topic grows or
        did not exist yet)."""
        index = dict(self.index)  # a number once given is kept (new ones go last)
        for topic in self.topics:
            meta = self.consumer.list_topics(topic, timeout=10).topics.get(topic)
            for p in sorted(meta.partitions if meta is not None else ()):
                index.setdefault((topic, p), len(index))
        if len(index) != len(self.index):
            self.index, self.of = index, len(index)
            for j in index.values():
                self.clocks.setdefault(j, SourceClock(self.idle_s))
            self.last.clear()

    def _declaration(self, j: int, now: float) -> Declaration:
        clock = self.clocks[j]
        return Declaration("source", j, self.of, clock.wm, clock.idle(now))

    def resumed(self, times: list[tuple[str, int, float]]) -> list[Declaration]:
        """Declarations to send before these events when they wake an idle partition:
        every idle partition is declared active again (at its last watermark) and waited
        for another ``idle_s`` at its end, so one that is about to deliver is not passed
        by the first one read (Kafka Streams waits ``max.task.idle.ms`` likewise)."""
        woke = any(
            (last := self.last.get(self.index.get((topic, p), -1))) is not None and last.idle
            for topic, p, _ in times
        )
        if times and not self.last:  # the first events since the start: all active first
            self.last = {j: Declaration("source", j, self.of, c.wm) for j, c in self.clocks.items()}
            return list(self.last.values())
        if not woke:
            return []
        out = []
        for j, clock in self.clocks.items():
            clock.wake()
            last = self.last.get(j)
            if last is not None and last.idle:
                self.last[j] = d = Declaration("source", j, self.of, last.wm, False)
                out.append(d)
        return out

    def read(self, times: list[tuple[str, int, float]]) -> None:
        for topic, p, t in times:
            j = self.index.get((topic, p))
            if j is not None:
                self.clocks[j].read(t)

    def due(self, now: float, force: bool = False) -> list[Declaration]:
        """What changed since last declared (at most every ``DECLARE_EVERY_S``)."""
        if not force and now - self.sent_at < DECLARE_EVERY_S:
            return []
        mono = time.monotonic()
        self._positions(mono)
        out = []
        for j in self.clocks:
            d = self._declaration(j, mono)
            if d != self.last.get(j):
                self.last[j] = d
                out.append(d)
        if out:
            self.sent_at = now
        return out

    def _positions(self, now: float) -> None:
        """Which assigned partitions the reader has read to their end."""
        assigned = self.consumer.assignment()
        if not assigned:
            return
        if any((tp.topic, tp.partition) not in self.index for tp in assigned):
            self._number()
        for tp in self.consumer.position(assigned):
            j = self.index.get((tp.topic, tp.partition))
            if j is None:
                continue
            low, high = self.consumer.get_watermark_offsets(
                TopicPartition(tp.topic, tp.partition), cached=True
            )
            if high is None or high < 0:
                continue  # not fetched yet: not known to be at the end
            at = tp.offset if tp.offset >= 0 else low
            self.clocks[j].position(at >= high, now)
