"""Keyed operators: key → key group → partition → owning replica.

As Flink's ``KeyGroupRangeAssignment``: a key hashes into one of a fixed number of key
groups (the operator's ``key_groups``, its most parallelism, fixed for the topology's
life), and contiguous ranges of groups go to the operator's topic partitions, one per
replica slot of its pool. The groups of a partition never change, so an upstream
producer routes an event by its key alone, whatever the replica count: a resize moves
*partitions* (with their key groups' state) between the active replicas, at a
micro-batch boundary, and the events of a key stay in one partition in the order they
were produced (``services/dataplane/slots.py``).

The hash is CRC-32 of the key's UTF-8 text: Python's ``hash`` is salted per process, and
every producer (the ingress, each replica) must place a key alike.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

DEFAULT_KEY_GROUPS = 128  # Flink's default most parallelism


def key_group(key: str, groups: int) -> int:
    return zlib.crc32(key.encode()) % groups


def partition_of_group(group: int, groups: int, partitions: int) -> int:
    """The partition whose contiguous range of groups holds ``group``."""
    return group * partitions // groups


def groups_of_partition(partition: int, groups: int, partitions: int) -> range:
    """The key groups ``partition`` holds (the inverse of ``partition_of_group``)."""
    first = -(-partition * groups // partitions)
    last = -(-(partition + 1) * groups // partitions)
    return range(first, last)


def partition_of_key(key: str, groups: int, partitions: int) -> int:
    return partition_of_group(key_group(key, groups), groups, partitions)


def owner(partition: int, partitions: int, active: int) -> int:
    """The active replica (0-based) that serves ``partition``: contiguous ranges of
    partitions, as Flink gives key groups to subtasks."""
    return partition * max(1, active) // partitions


def moved_partitions(partitions: int, before: int, after: int) -> list[int]:
    """The partitions whose owner changes when the count goes from ``before`` to
    ``after``."""
    return [
        p for p in range(partitions) if owner(p, partitions, before) != owner(p, partitions, after)
    ]


def owners(partitions: Iterable[int], total: int, active: int) -> dict[int, list[int]]:
    """Replica -> the partitions it serves."""
    out: dict[int, list[int]] = {}
    for p in partitions:
        out.setdefault(owner(p, total, active), []).append(p)
    return out
