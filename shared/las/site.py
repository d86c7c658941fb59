"""Where LAS admits a pipeline's events (the ``admission`` setting): the ingress service,
which reads the source and produces what it admits into the entry operator's topic, or
the entry operator's first step, whose replicas read the source themselves (one read and
one Kafka hop less per event).

``auto``, the default, takes the entry step wherever the pipeline allows it and the
ingress elsewhere, saying why. Every service decides alone from the same facts (the
topology, the settings, the source topic's partitions after a missing one is created
with a partition per entry replica), so the ingress and the dataplane agree without
talking, and the first to decide records the site in the knowledge base, where every
later start of any service finds it: the ingress stands aside exactly when the dataplane
admits, across restarts and a source topic changed meanwhile. A site named by the
settings is recorded too; naming the other one later moves the deployment, its read
positions carried (``las.moves``)."""

from __future__ import annotations

import logging
from typing import Any, Literal

from elastic_sps.las.moves import settle, site_ran
from elastic_sps.model.topology import Topology

Site = Literal["ingress", "entry"]

log = logging.getLogger("sps.admission")


def entry_step_refusal(topo: Topology, task_window_s: float) -> str | None:
    """What keeps admission from being the entry operator's first step (None: nothing):
    its replicas own the source's partitions as a keyed operator's own its partitions,
    and declare their watermarks between reads of a live window."""
    entries = topo.entry_operators
    if len(entries) != 1:
        return (
            f"admission: entry needs one entry operator, {topo.name} has {len(entries)} "
            "(each would decide its own shedding)"
        )
    if topo[entries[0]].stateful:
        return (
            f"admission: entry needs a stateless entry operator; {entries[0]} is keyed, and "
            "the source's partitions are not known to be partitioned by its key"
        )
    if len(topo.source.topics) > 1:
        return "admission: entry reads one source topic"
    if task_window_s <= 0:
        return "admission: entry needs task epochs (SPS_TASK_WINDOW_S > 0)"
    return None


def entry_pool(settings: Any, topo: Topology) -> int:
    """The most replicas the entry operator runs: ``fixed_replicas``, else its largest
    pool."""
    return int(settings.fixed_replicas or topo[topo.entry_operators[0]].max_replicas)


def auto_site(
    topo: Topology, task_window_s: float, partitions: int, pool: int | None = None
) -> tuple[Site, str]:
    """``auto``'s choice for a source topic of ``partitions``, and why: the entry step
    needs a partition per replica of the entry operator's largest pool (``pool``, else its
    max_replicas: each replica owns partitions; fewer would leave the plan counting
    replicas with nothing to read)."""
    refused = entry_step_refusal(topo, task_window_s)
    if refused is not None:
        return "ingress", refused
    entry = topo[topo.entry_operators[0]]
    pool = pool or int(entry.max_replicas)
    if partitions < pool:
        return "ingress", (
            f"the source topic has {partitions} partitions for {entry.name}'s pool of up to {pool}"
        )
    return "entry", f"{entry.name}'s replicas read the source's {partitions} partitions"


def source_topic(settings: Any, topo: Topology) -> str:
    """The topic the source's events are read from: the topology's, else the ingress's."""
    return topo.source.topic(str(settings.topics.ingress))


def resolve(settings: Any, topo: Topology, r: Any = None) -> Site:
    """The site ``settings.admission`` names (recorded; a deployment recorded at the
    other site is moved, ``las.moves``); for ``auto``, the one recorded in the
    knowledge base (``Keys.admission_site``), else the one ``auto_site`` picks once a
    missing source topic exists with a partition per entry replica (as the dataplane and
    ``up`` create it), recorded by the first service to decide: a restarted service, or
    one started after a topic changed, decides as the first did (moving a running
    deployment's door would move its offsets too). Logged with the reason."""
    from elastic_sps.io.knowledge_base import Keys
    from elastic_sps.io.marks import text
    from elastic_sps.io.redis_client import redis_client

    choice = str(settings.admission)
    r = r if r is not None else redis_client(settings.redis_url)
    if choice != "auto":
        named: Site = "entry" if choice == "entry" else "ingress"
        settle(settings, topo, r, named, source_topic(settings, topo))
        return named
    keys = Keys(settings.key_prefix)
    key = keys.admission_site
    recorded = r.get(key)
    if recorded is None:
        ran = site_ran(settings.kafka_bootstrap_servers, r, keys, topo)
        chosen, why = (ran, "where it ran before the record") if ran else _decide(settings, topo)
        r.set(key, chosen, nx=True)  # a service deciding at the same moment may be first
        recorded = r.get(key)
    else:
        why = f"as recorded in {key}"
    site: Site = "entry" if text(recorded) == "entry" else "ingress"
    log.info(
        "admission: auto: %s (%s)", "the entry step" if site == "entry" else "the ingress", why
    )
    return site


def _decide(settings: Any, topo: Topology) -> tuple[Site, str]:
    from elastic_sps.io.kafka_admin import ensure_topics, partition_count

    partitions, pool = 0, entry_pool(settings, topo)
    if entry_step_refusal(topo, settings.task_window_s) is None:
        topic = source_topic(settings, topo)
        ensure_topics(settings.kafka_bootstrap_servers, [topic], partitions=pool)
        partitions = partition_count(settings.kafka_bootstrap_servers, topic, wait_s=15.0)
    return auto_site(topo, settings.task_window_s, partitions, pool)
