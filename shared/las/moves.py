"""Moving a deployment's admission from one site to the other (``las.site``) without an
event read twice or skipped.

The ingress reads the source as its deployment's consumer group (``ingress_group``) and
produces what it admits into the entry operator's topic; the entry step reads the source
itself and keeps its progress per source partition in the entry operator's committed
hash, the hash that holds its own topic's progress under the ingress. A service starting
at the site the deployment did not run at carries the read positions across before
anything reads, once: the first to start holds ``Keys.admission_move`` while it moves,
the others wait for the recorded site to change.

* ingress → entry: every event the ingress admitted must be processed (else the move is
  refused: they would be left in the entry operator's topic, which the entry step does
  not read); the entry step then starts where the ingress group's commits say.
* entry → ingress: the ingress group starts where the entry step had processed; the entry
  operator's topic, which nothing wrote to since the last move, counts as processed to
  its end.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from confluent_kafka import KafkaException

from elastic_sps.io.kafka_admin import (
    GroupRequestFailed,
    group_offsets,
    group_readers,
    partition_count,
    set_group_offsets,
    topic_ends,
)
from elastic_sps.io.knowledge_base import Keys
from elastic_sps.io.marks import text
from elastic_sps.model.topology import Topology

# the ingress's consumer group every deployment shared before each had its own (and the
# default key prefix's own, so such a deployment keeps its group)
SHARED_INGRESS_GROUP = "sps-ingress"
MOVE_WAIT_S = 120.0  # the longest a service waits for another's move (the lock's expiry)

log = logging.getLogger("sps.admission")


class MoveRefused(ValueError):
    """A move between admission sites that would lose events, with what to do instead."""


def ingress_group(prefix: str) -> str:
    """The ingress's consumer group on the source: one per deployment (its key prefix),
    so deployments on one broker neither rebalance each other's ingresses nor keep a
    group from being empty, which Kafka needs to set its offsets in a move."""
    return f"{prefix}-ingress"


def ran_in_shared_group(bootstrap: str, r: Any, keys: Keys, topo: Topology) -> bool:
    """Whether the deployment's ingress last ran in the group every deployment shared:
    it never started since groups are per deployment (``Keys.ingress_group`` unset), yet
    it received events and its entry operators' topics hold records."""
    if ingress_group(keys.prefix) == SHARED_INGRESS_GROUP or r.exists(keys.ingress_group):
        return False
    return int(r.hget(keys.ingress_counts, "received") or 0) > 0 and any(
        any(topic_ends(bootstrap, keys.topic(op)).values()) for op in topo.entry_operators
    )


def ingress_offsets(
    bootstrap: str, r: Any, keys: Keys, topo: Topology, source: str, n: int
) -> dict[int, int]:
    """Where the deployment's ingress committed on ``source``'s ``n`` partitions: its
    group's commits, else, if it last ran in the shared group, that group's."""
    read = group_offsets(bootstrap, ingress_group(keys.prefix), source, n)
    if read or not ran_in_shared_group(bootstrap, r, keys, topo):
        return read
    return group_offsets(bootstrap, SHARED_INGRESS_GROUP, source, n)


def adopt_shared_offsets(
    bootstrap: str, r: Any, keys: Keys, topo: Topology, sources: list[str]
) -> list[str]:
    """At an ingress's start, once per deployment (then ``Keys.ingress_group`` records
    its group): if it last ran in the shared group, its group starts on each of
    ``sources`` it has no commits on where the shared group's commits say, not from the
    earliest record. The sources it did that for."""
    own = ingress_group(keys.prefix)
    adopted: list[str] = []
    for source in sources if ran_in_shared_group(bootstrap, r, keys, topo) else []:
        n = partition_count(bootstrap, source)
        if not n or group_offsets(bootstrap, own, source, n):
            continue
        shared = group_offsets(bootstrap, SHARED_INGRESS_GROUP, source, n)
        if shared:
            set_group_offsets(bootstrap, own, source, shared)
            log.info("ingress: %s starts where %s left %s", own, SHARED_INGRESS_GROUP, source)
            adopted.append(source)
    r.set(keys.ingress_group, own)
    return adopted


def settle(settings: Any, topo: Topology, r: Any, site: str, source_topic: str) -> None:
    """Record ``site`` for a deployment's first start; at a later start naming the other
    site, move the deployment there (once, whichever service comes first)."""
    keys = Keys(settings.key_prefix)
    if not r.exists(keys.admission_site):  # a first start, or one from before the record
        ran = site_ran(settings.kafka_bootstrap_servers, r, keys, topo)
        r.set(keys.admission_site, ran or site, nx=True)
    if text(r.get(keys.admission_site)) == site:
        return
    me, deadline = uuid.uuid4().hex, time.monotonic() + MOVE_WAIT_S
    while not r.set(keys.admission_move, me, nx=True, ex=int(MOVE_WAIT_S)):
        if text(r.get(keys.admission_site)) == site:
            return  # another service moved it
        if time.monotonic() > deadline:
            raise MoveRefused(f"admission: another service's move to {site} did not end")
        time.sleep(0.2)
    try:
        if text(r.get(keys.admission_site)) != site:
            _stopped(settings.kafka_bootstrap_servers, r, keys, source_topic, deadline)
            mover = _to_entry if site == "entry" else _to_ingress
            try:
                mover(settings, topo, r, keys, source_topic)
            except (KafkaException, GroupRequestFailed, TimeoutError) as exc:  # the broker's
                raise MoveRefused(f"admission: the move to {site} failed: {exc}") from exc
            r.set(keys.admission_site, site)
            log.info("admission: moved to %s, the source's read positions carried", site)
    finally:
        if text(r.get(keys.admission_move)) == me:
            r.delete(keys.admission_move)


def site_ran(bootstrap: str, r: Any, keys: Keys, topo: Topology) -> str | None:
    """Where a deployment with no recorded site ran (one from before the record): None
    for a new one (its entry operator has no progress); the ingress if the operator's
    own topic holds records (only the ingress writes there), else the entry step."""
    entries = topo.entry_operators
    if len(entries) != 1 or not r.exists(keys.committed(entries[0])):
        return None
    return "ingress" if any(topic_ends(bootstrap, keys.topic(entries[0])).values()) else "entry"


def _stopped(bootstrap: str, r: Any, keys: Keys, source: str, deadline: float) -> None:
    """Wait until no dataplane holds the deployment's lease and no ingress reads its
    source (a service stopped a moment ago: until its lease or group session lapses);
    refused at ``deadline``: a service still running would read past the move."""
    while True:
        running = []
        if r.exists(keys.dataplane_lease):
            running.append("a dataplane holds the lease")
        if group_readers(bootstrap, ingress_group(keys.prefix), source):
            running.append(f"an ingress reads {source}")
        if not running:
            return
        if time.monotonic() > deadline:
            raise MoveRefused(
                f"admission: {' and '.join(running)}: stop every service of the deployment, "
                "then start it at the new site"
            )
        time.sleep(0.5)


def _entry_operator(topo: Topology) -> str:
    entries = topo.entry_operators
    if len(entries) != 1:
        raise MoveRefused(
            f"admission: a move between sites needs one entry operator, {topo.name} has "
            f"{len(entries)}: move on a new key prefix"
        )
    return entries[0]


def _to_entry(settings: Any, topo: Topology, r: Any, keys: Keys, source: str) -> None:
    op = _entry_operator(topo)
    bootstrap = settings.kafka_bootstrap_servers
    done = {int(j): int(v) for j, v in r.hgetall(keys.committed(op)).items()}
    left = stranded(bootstrap, keys.topic(op), done)
    if left:
        raise MoveRefused(
            f"admission: {left} events the ingress admitted are not processed by {op} yet, "
            "and the entry step does not read its topic: run at the ingress until they "
            "are (with the source's producers stopped), then move"
        )
    n = partition_count(bootstrap, source)
    read = ingress_offsets(bootstrap, r, keys, topo, source, n) if n else {}
    _replace(r, keys.committed(op), {j: read.get(j, 0) for j in range(n)})
    r.delete(keys.position(op))  # served offsets of the topic read before


def _to_ingress(settings: Any, topo: Topology, r: Any, keys: Keys, source: str) -> None:
    op = _entry_operator(topo)
    bootstrap = settings.kafka_bootstrap_servers
    done = {int(j): int(v) for j, v in r.hgetall(keys.committed(op)).items()}
    n = partition_count(bootstrap, source)
    if n:
        try:
            set_group_offsets(
                bootstrap, ingress_group(keys.prefix), source,
                {j: done.get(j, 0) for j in range(n)},
            )  # fmt: skip
        except (KafkaException, GroupRequestFailed) as exc:  # the broker's refusal, said
            raise MoveRefused(f"admission: the ingress's read positions not set ({exc}): "
                              "stop every ingress, then start again") from exc  # fmt: skip
    _replace(r, keys.committed(op), topic_ends(bootstrap, keys.topic(op)))
    r.delete(keys.position(op))  # served offsets of the topic read before


def _replace(r: Any, key: str, offsets: dict[int, int]) -> None:
    pipe = r.pipeline(transaction=True)
    pipe.delete(key)
    if offsets:
        pipe.hset(key, mapping={str(j): v for j, v in offsets.items()})
    pipe.execute()


def stranded(bootstrap: str, topic: str, done: dict[int, int], timeout_s: float = 30.0) -> int:
    """Events (watermark declarations not counted) in ``topic`` past ``done`` (partition
    -> next offset to process), read to the partitions' ends."""
    from confluent_kafka import Consumer, TopicPartition

    from elastic_sps.io.connections import kafka_config
    from elastic_sps.io.watermarks import is_declaration

    ends = {j: end for j, end in topic_ends(bootstrap, topic).items() if end > done.get(j, 0)}
    if not ends:
        return 0
    c = Consumer(kafka_config(bootstrap, **{"group.id": "sps-admission-move",
                                            "enable.auto.commit": False}))  # fmt: skip
    try:
        c.assign([TopicPartition(topic, j, done.get(j, 0)) for j in ends])
        count, deadline = 0, time.monotonic() + timeout_s
        while ends and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                j = m.partition() or 0
                if m.error() is not None or j not in ends:
                    continue
                count += not is_declaration(m.value())
                if (m.offset() or 0) + 1 >= ends[j]:
                    del ends[j]
        if ends:
            raise TimeoutError(f"admission: {topic} not read to its end in {timeout_s} s")
        return count
    finally:
        c.close()
