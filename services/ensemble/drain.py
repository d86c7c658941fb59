"""The demo's drain: wait until every event sent has been processed, every operator's
progress committed and the counters still, before its figures are read."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from elastic_sps.io.knowledge_base import KnowledgeBase
from elastic_sps.settings import ServiceSettings

# past the quiet time, how long more the drain waits for every event the entry step read
# to have its admission fate counted (a killed task's reads can count twice: bounded)
UNCOUNTED_WAIT_S = 30.0


def quiet_s_of(ens: Any) -> float:
    """The source's idle time, two checkpoints (what a fired window's counters take to
    show) and two polls of the drain, as the ensemble's services are set."""
    env = getattr(ens, "env", {})
    names = ("idle_s", "checkpoint_s", "task_window_s")
    s = ServiceSettings(**{n: env[f"SPS_{n.upper()}"] for n in names if f"SPS_{n.upper()}" in env})
    # counters are published at each checkpoint, or only at an epoch's end without them
    return s.idle_s + 2 * (s.checkpoint_s or s.task_window_s) + 1


def admits_at_entry(ens: Any, r: Any, prefix: str) -> bool:
    """Whether the entry step admits: asked for (``SPS_ADMISSION=entry``), or what
    ``auto`` (the default) decided, as the services recorded it (``las.site.resolve``)."""
    from elastic_sps.io.knowledge_base import Keys
    from elastic_sps.io.marks import text

    asked = ens.env.get("SPS_ADMISSION", "auto")
    if asked != "auto":
        return bool(asked == "entry")
    recorded = r.get(Keys(prefix).admission_site)
    return recorded is not None and text(recorded) == "entry"


def _entry_source(
    ens: Any, topo: Any, r: Any, prefix: str
) -> Callable[[], tuple[str, list[int]]] | None:
    """With admission at the entry step: the entry operator and its source topic's ends
    as the broker has them now (the dataplane lists them only while its queries plan
    and report); else None."""
    if not admits_at_entry(ens, r, prefix):
        return None
    from confluent_kafka.admin import AdminClient

    from elastic_sps.io.connections import kafka_config
    from elastic_sps.io.kafka_admin import partition_count
    from elastic_sps.io.kafka_io import end_offsets
    from elastic_sps.las.site import source_topic

    topic = source_topic(ServiceSettings(), topo)
    partitions = {topic: partition_count(ens.bootstrap, topic)}
    admin = AdminClient(kafka_config(ens.bootstrap))
    return lambda: (topo.entry_operators[0], end_offsets(admin, partitions)[topic])


def _behind(
    kb: KnowledgeBase, topo: Any, source: Callable[[], tuple[str, list[int]]] | None
) -> int:
    """Events not yet processed, over every operator: the ends its producers recorded
    (an entry operator reading the source: the broker's, ``source``) less its replicas'
    committed offsets."""
    entry, ends = source() if source is not None else (None, [])
    behind = 0
    for op in topo.operators:
        if op.name == entry:
            behind += sum(kb.backlog(op.name, len(ends), ends=ends))
        else:
            behind += sum(kb.backlog(op.name, op.max_replicas))
    return behind


def uncounted_at_entry(counts: dict[str, int]) -> int:
    """Of the ingress counts (``KnowledgeBase.ingress_counts``), events the entry step
    read whose fate (admitted, shed, dead-lettered) is not yet counted: the fates leave
    with the checkpoint that records their progress."""
    fates = sum(counts.get(n, 0) for n in ("admitted", "shed", "dead_lettered"))
    return counts.get("received", 0) - fates


def drain(
    r: Any,
    prefix: str,
    topo: Any,
    ens: Any,
    drain_s: float,
    tick: Any,
    quiet_s: float | None = None,
) -> None:
    """Wait until the ingress has taken everything, every operator's query has committed
    up to the partition ends the producers recorded, and nothing has moved since for
    longer than a source partition takes to be declared idle (``quiet_s``, by default
    ``quiet_s_of``): until then, a partition that stopped first holds windows open, which
    fire at the idle declaration; at the entry step, until every event read has its
    admission fate counted too (``UNCOUNTED_WAIT_S`` at most). Or time out.
    Event-driven: a slow machine only takes longer, it does not end the drain early."""
    kb = KnowledgeBase(r, prefix)
    deadline = time.monotonic() + drain_s
    quiet_s = quiet_s_of(ens) if quiet_s is None else quiet_s
    quiet_since, last = time.monotonic(), None
    source = _entry_source(ens, topo, r, prefix)
    while time.monotonic() < deadline:
        tick()
        behind = _behind(kb, topo, source)
        # what every stage has done (its counters, published at each checkpoint)
        counts = kb.ingress_counts()
        progress = (
            counts.get("received"),
            [sorted(kb.counts(op.name).items()) for op in topo.operators],
        )
        if behind or progress != last:
            quiet_since, last = time.monotonic(), progress
        elif time.monotonic() - quiet_since >= quiet_s:
            waited = time.monotonic() - quiet_since - quiet_s
            if source is None or uncounted_at_entry(counts) <= 0 or waited >= UNCOUNTED_WAIT_S:
                return
        time.sleep(0.5)
