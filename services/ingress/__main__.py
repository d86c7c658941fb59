"""python -m elastic_sps.services.ingress: the input topic -> LAS -> the entry operators'
topics (the loop: ``elastic_sps.services.ingress.loop``; /metrics and /health:
``elastic_sps.services.ops_server``)."""

from __future__ import annotations

import logging
import signal
import threading

from confluent_kafka import KafkaException
from prometheus_client import CollectorRegistry
from redis.exceptions import RedisError

from elastic_sps.io.kafka_admin import GroupRequestFailed, ensure_topics
from elastic_sps.io.knowledge_base import Keys
from elastic_sps.io.redis_client import redis_client
from elastic_sps.las.moves import MoveRefused, adopt_shared_offsets
from elastic_sps.las.site import resolve as resolve_admission
from elastic_sps.logs import configure_logging
from elastic_sps.model import topology
from elastic_sps.pipeline.costs import service_topology
from elastic_sps.services.ingress.loop import Ingress
from elastic_sps.services.ops_server import serve
from elastic_sps.settings import IngressSettings, settings_or_exit

log = logging.getLogger("sps.ingress")


def stand_aside(settings: IngressSettings) -> None:
    """With admission at the entry step the entry operator's replicas read the source:
    an ingress started anyway (a compose file that lists it) reads nothing, and says so
    on /health, until it is stopped."""
    log.info("admission at the entry step: the entry operator's replicas admit; nothing read here")
    serve(
        "ingress",
        settings.web_host,
        settings.web_port,
        CollectorRegistry(),
        lambda: (True, {"service": "ingress", "status": "standing aside: admission=entry"}),
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()


def main(settings: IngressSettings) -> None:
    configure_logging("ingress")
    try:
        site = resolve_admission(settings, topology.load(settings.topology))
    except (RedisError, KafkaException, MoveRefused) as exc:  # said in one line
        raise SystemExit(f"ingress: where to admit not resolved: {exc}") from None
    if site == "entry":
        stand_aside(settings)
        return
    topo = service_topology(settings)
    ensure_topics(settings.kafka_bootstrap_servers, settings.topics.control())
    for op in topo.operators:
        ensure_topics(
            settings.kafka_bootstrap_servers,
            [Keys(settings.key_prefix).topic(op.name)],
            partitions=op.max_replicas,
        )
    sources = list(topo.source.topics) or [settings.topics.ingress]
    try:  # a deployment upgraded from the group every deployment shared
        adopt_shared_offsets(
            settings.kafka_bootstrap_servers, redis_client(settings.redis_url),
            Keys(settings.key_prefix), topo, sources,
        )  # fmt: skip
    except (RedisError, KafkaException, GroupRequestFailed) as exc:  # said in one line
        raise SystemExit(f"ingress: the group's read positions not taken over: {exc}") from None
    registry = CollectorRegistry()
    ingress = Ingress(settings, registry)
    counts = ingress.metrics.counts
    serve(
        "ingress",
        settings.web_host,
        settings.web_port,
        registry,
        lambda: (True, {"service": "ingress", "status": "ok", "counts": counts}),
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGHUP, lambda *_: stop.set())
    ingress.routers.refresh()
    threading.Thread(target=ingress.publish_on_time, args=(stop,), daemon=True).start()
    while not stop.is_set():
        ingress.poll()
    ingress.close()


if __name__ == "__main__":
    main(settings_or_exit(IngressSettings))
