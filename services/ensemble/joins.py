"""``up`` hands the ensemble over (a replay begins) once the services' consumer groups
have joined: a record produced while a group still joins, or rebalances for a member
that just joined, waits for that before it is fetched. Awaited, not a fixed wait: on a
2-core machine a join takes from a fraction of a second to several."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from confluent_kafka import KafkaException

from elastic_sps.io.kafka_admin import service_group, wait_groups_stable
from elastic_sps.las.moves import ingress_group

if TYPE_CHECKING:
    from elastic_sps.io.topics import Topics
    from elastic_sps.model.topology import Topology

log = logging.getLogger("sps.supervisor")

JOIN_WAIT_S = 60.0  # past this up goes on (as it did after its fixed wait), saying which
# the fixed wait ``up`` had (joins took about 3 s on the embedded broker): what a group
# that cannot be named (a swapped-in service's) or seen (a broker without the request) gets
BLIND_SETTLE_S = 4.0


def service_reads(topics: Topics) -> dict[str, list[str]]:
    """The topics each built-in faust service reads (its ``ServiceApp.consume`` calls)."""
    return {
        "monitor": [topics.metrics],
        "analyze": [topics.stats],
        "plan": [topics.analysis],
        "execute": [topics.plans, topics.requests],
    }


def control_groups(topics: Topics, services: Iterable[str]) -> dict[str, list[str]]:
    """Of ``services``, each faust one's consumer group and the topics it reads."""
    reads = service_reads(topics)
    return {service_group(s): reads[s] for s in services if s in reads}


def ensemble_groups(
    topics: Topics, topo: Topology, prefix: str, admission: str, started: Iterable[str]
) -> dict[str, list[str]]:
    """The groups of the built-in services ``started``: the faust ones', and with
    admission at the ingress the ingress's on the source (the dataplane assigns its
    partitions itself: no group)."""
    started = list(started)
    groups = control_groups(topics, started)
    if admission == "ingress" and "ingress" in started:
        groups[ingress_group(prefix)] = [topo.source.topic(topics.ingress)]
    return groups


def settle(bootstrap: str, groups: dict[str, list[str]], blind: bool, since: float) -> None:
    """Wait until ``groups`` have settled (``wait_groups_stable``); ``blind``: a service
    whose group is not known runs too, so also until ``BLIND_SETTLE_S`` after ``since``
    (monotonic: when every service was healthy)."""
    try:
        late = wait_groups_stable(bootstrap, groups, JOIN_WAIT_S)
    except KafkaException as exc:
        log.info("consumer groups not described (%s): a fixed wait for the joins", exc)
        blind = True
    else:
        if late:
            log.warning("consumer groups %s not settled after %.0f s: going on", late, JOIN_WAIT_S)
        else:
            took = time.monotonic() - since
            log.info("consumer groups %s settled %.1f s after all were healthy", list(groups), took)
    if blind:
        time.sleep(max(0.0, since + BLIND_SETTLE_S - time.monotonic()))
