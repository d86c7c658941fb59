"""Moving a deployment between admission sites against a real broker and redis-server
(``elastic_sps.las.moves``, through ``las.site.resolve``): the source's read positions
carried across both ways, a move refused while events the ingress admitted wait
unprocessed, and a move made once when two services start together."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
import redis
from confluent_kafka import Producer

from elastic_sps.io.envelope import Envelope
from elastic_sps.io.kafka_admin import ensure_topics, group_offsets, set_group_offsets
from elastic_sps.io.knowledge_base import Keys
from elastic_sps.io.watermarks import Declaration
from elastic_sps.las import moves
from elastic_sps.las.moves import SHARED_INGRESS_GROUP, MoveRefused, ingress_group
from elastic_sps.las.site import resolve
from elastic_sps.settings import ServiceSettings
from tests.support.pipelines import one_operator

pytestmark = pytest.mark.integration


def pipeline(topic: str) -> Any:
    return one_operator(topic, 2)


class Deployment:
    """A prefix, a source topic of 2 partitions and the entry operator ``a``'s topic."""

    def __init__(self, bootstrap: str, redis_url: str) -> None:
        self.bootstrap = bootstrap
        self.r = redis.Redis.from_url(redis_url)
        self.prefix = f"move{uuid.uuid4().hex[:8]}"
        self.keys = Keys(self.prefix)
        self.group = ingress_group(self.prefix)  # its ingress's
        self.source = f"src-{uuid.uuid4().hex[:8]}"
        self.topo = pipeline(self.source)
        self.redis_url = redis_url
        ensure_topics(bootstrap, [self.source, self.keys.topic("a")], partitions=2)
        self.producer = Producer({"bootstrap.servers": bootstrap})

    def resolve(self, admission: str) -> str:
        settings = ServiceSettings(
            kafka_bootstrap_servers=self.bootstrap,
            redis_url=self.redis_url,
            key_prefix=self.prefix,
            admission=admission,
        )
        return resolve(settings, self.topo)

    def produce(self, topic: str, partition: int, values: list[bytes]) -> None:
        for v in values:
            self.producer.produce(topic, v, partition=partition)
        self.producer.flush(10)

    def progress(self) -> dict[int, int]:
        return {int(j): int(v) for j, v in self.r.hgetall(self.keys.committed("a")).items()}

    def site(self) -> str:
        return (self.r.get(self.keys.admission_site) or b"").decode()


def event(k: int) -> bytes:
    return Envelope(f"e{k}", 1.0, "source", {"k": k}).encode()


DECLARATION = Declaration("source", 0, 1, 5.0, False).encode()


@pytest.fixture
def dep(kafka_bootstrap: str, redis_url: str) -> Deployment:
    return Deployment(kafka_bootstrap, redis_url)


def test_a_named_site_is_recorded_and_a_second_start_there_moves_nothing(dep):
    assert dep.resolve("ingress") == "ingress"
    dep.r.hset(dep.keys.committed("a"), mapping={"0": 3})
    assert dep.resolve("ingress") == "ingress"
    assert dep.site() == "ingress" and dep.progress() == {0: 3}


def test_to_the_entry_step_it_starts_where_the_ingress_group_left_the_source(dep):
    dep.produce(dep.source, 0, [b"{}"] * 5)
    dep.produce(dep.source, 1, [b"{}"] * 3)
    set_group_offsets(dep.bootstrap, dep.group, dep.source, {0: 4, 1: 2})
    # a's topic: partition 0 processed to its end (3 events); partition 1's one event
    # processed, the declaration after it not yet: a declaration is no event to strand
    dep.produce(dep.keys.topic("a"), 0, [event(1), event(2), event(3)])
    dep.produce(dep.keys.topic("a"), 1, [event(4), DECLARATION])
    assert dep.resolve("ingress") == "ingress"
    dep.r.hset(dep.keys.committed("a"), mapping={"0": 3, "1": 1})
    assert dep.resolve("entry") == "entry"
    assert dep.site() == "entry"
    assert dep.progress() == {0: 4, 1: 2}  # the source's offsets now
    assert dep.r.get(dep.keys.admission_move) is None


def test_a_move_to_the_entry_step_is_refused_while_admitted_events_wait(dep):
    dep.produce(dep.keys.topic("a"), 0, [event(1), event(2), event(3)])
    dep.produce(dep.keys.topic("a"), 1, [event(4), DECLARATION])
    assert dep.resolve("ingress") == "ingress"
    dep.r.hset(dep.keys.committed("a"), mapping={"0": 1, "1": 0})
    with pytest.raises(MoveRefused, match="3 events the ingress admitted"):
        dep.resolve("entry")  # events 2, 3 and 4 are not processed
    assert dep.site() == "ingress" and dep.progress() == {0: 1, 1: 0}
    assert dep.r.get(dep.keys.admission_move) is None


def test_to_the_ingress_its_group_starts_where_the_entry_step_had_processed(dep):
    dep.produce(dep.source, 0, [b"{}"] * 8)
    dep.produce(dep.source, 1, [b"{}"] * 6)
    set_group_offsets(dep.bootstrap, dep.group, dep.source, {0: 1, 1: 1})  # stale
    dep.produce(dep.keys.topic("a"), 0, [event(1), event(2), event(3)])
    dep.produce(dep.keys.topic("a"), 1, [event(4), event(5)])
    assert dep.resolve("entry") == "entry"
    dep.r.hset(dep.keys.committed("a"), mapping={"0": 7, "1": 5})  # source offsets
    assert dep.resolve("ingress") == "ingress"
    assert group_offsets(dep.bootstrap, dep.group, dep.source, 2) == {0: 7, 1: 5}
    assert dep.progress() == {0: 3, 1: 2}  # a's own topic, processed to its end


def test_a_second_service_waits_for_the_first_ones_move_and_moves_nothing(dep):
    assert dep.resolve("ingress") == "ingress"
    dep.r.hset(dep.keys.committed("a"), mapping={"0": 9})
    dep.r.set(dep.keys.admission_move, "another service", ex=60)

    def the_other_finishes() -> None:
        time.sleep(0.5)
        dep.r.set(dep.keys.admission_site, "entry")
        dep.r.delete(dep.keys.admission_move)

    threading.Thread(target=the_other_finishes).start()
    assert dep.resolve("entry") == "entry"
    assert dep.progress() == {0: 9}  # as the other service left it


def test_a_move_waits_for_an_ingress_reading_the_source_and_is_refused_if_it_stays(
    dep, monkeypatch
):
    from confluent_kafka import Consumer

    monkeypatch.setattr(moves, "MOVE_WAIT_S", 3.0)
    dep.produce(dep.source, 0, [b"{}"] * 2)
    assert dep.resolve("entry") == "entry"
    dep.r.hset(dep.keys.committed("a"), mapping={"0": 2, "1": 0})
    member = Consumer({"bootstrap.servers": dep.bootstrap, "group.id": dep.group})
    member.subscribe([dep.source])
    try:
        deadline = time.monotonic() + 30
        while not member.assignment():  # a member of the group, partitions assigned
            assert time.monotonic() < deadline, "never joined"
            member.poll(0.2)
        with pytest.raises(MoveRefused, match=f"an ingress reads {dep.source}"):
            dep.resolve("ingress")
    finally:
        member.close()
    assert dep.site() == "entry" and dep.progress() == {0: 2, 1: 0}


def test_a_move_waits_for_a_stopped_dataplanes_lease_to_lapse(dep):
    assert dep.resolve("entry") == "entry"
    dep.r.hset(dep.keys.committed("a"), mapping={"0": 4, "1": 0})
    dep.r.set(dep.keys.dataplane_lease, "a dataplane killed a moment ago", px=1500)
    assert dep.resolve("ingress") == "ingress"  # once the lease lapsed
    assert dep.r.get(dep.keys.dataplane_lease) is None
    assert group_offsets(dep.bootstrap, dep.group, dep.source, 2) == {0: 4, 1: 0}


def test_a_deployment_from_before_the_record_is_known_by_its_entry_operators_topic(dep):
    # it ran at the ingress (a's topic holds what the ingress produced), site unrecorded
    dep.produce(dep.source, 0, [b"{}"] * 5)
    # its ingress last ran before groups were per deployment: the shared group's commits
    dep.r.hset(dep.keys.ingress_counts, mapping={"received": 5})
    set_group_offsets(dep.bootstrap, SHARED_INGRESS_GROUP, dep.source, {0: 5, 1: 0})
    dep.produce(dep.keys.topic("a"), 0, [event(1), event(2), event(3)])
    dep.r.hset(dep.keys.committed("a"), mapping={"0": 3, "1": 0})
    assert dep.resolve("entry") == "entry"
    assert dep.progress() == {0: 5, 1: 0}  # the source's offsets, moved from the ingress
    assert dep.site() == "entry"


def test_one_from_before_the_record_that_ran_at_the_entry_step_moves_nothing(dep):
    dep.r.hset(dep.keys.committed("a"), mapping={"0": 7, "1": 5})  # a's topic is empty
    assert dep.resolve("entry") == "entry"
    assert dep.site() == "entry" and dep.progress() == {0: 7, 1: 5}


def test_auto_keeps_a_deployment_from_before_the_record_where_it_ran(dep):
    # named ingress before the record; the pipeline would have auto pick the entry step
    # (2 partitions for a's pool of 2), but its progress is of a's own topic
    dep.produce(dep.keys.topic("a"), 0, [event(1), event(2)])
    dep.r.hset(dep.keys.committed("a"), mapping={"0": 2, "1": 0})
    assert dep.resolve("auto") == "ingress"
    assert dep.site() == "ingress" and dep.progress() == {0: 2, 1: 0}


def test_another_deployments_ingress_running_does_not_block_a_move(
    dep: Deployment, kafka_bootstrap: str, redis_url: str
) -> None:
    from confluent_kafka import Consumer

    other = Deployment(kafka_bootstrap, redis_url)  # on the same broker, its ingress running
    member = Consumer({"bootstrap.servers": dep.bootstrap, "group.id": other.group})
    member.subscribe([other.source])
    try:
        deadline = time.monotonic() + 30
        while not member.assignment():
            assert time.monotonic() < deadline, "never joined"
            member.poll(0.2)
        assert dep.resolve("entry") == "entry"
        dep.r.hset(dep.keys.committed("a"), mapping={"0": 3, "1": 1})
        # Kafka sets a group's offsets only while it is empty: dep's own group is
        assert dep.resolve("ingress") == "ingress"
    finally:
        member.close()
    assert group_offsets(dep.bootstrap, dep.group, dep.source, 2) == {0: 3, 1: 1}


def adopt(dep: Deployment) -> list[str]:
    return moves.adopt_shared_offsets(dep.bootstrap, dep.r, dep.keys, dep.topo, [dep.source])


def test_an_upgraded_deployments_ingress_starts_where_the_shared_group_left_it(
    dep: Deployment,
) -> None:
    # its ingress ran before groups were per deployment: it received events and a's topic
    # holds what it produced
    dep.r.hset(dep.keys.ingress_counts, mapping={"received": 8, "admitted": 8})
    dep.produce(dep.keys.topic("a"), 0, [event(1), event(2)])
    set_group_offsets(dep.bootstrap, SHARED_INGRESS_GROUP, dep.source, {0: 6, 1: 2})
    assert adopt(dep) == [dep.source]
    assert group_offsets(dep.bootstrap, dep.group, dep.source, 2) == {0: 6, 1: 2}
    set_group_offsets(dep.bootstrap, SHARED_INGRESS_GROUP, dep.source, {0: 9, 1: 9})
    # once, at the deployment's first ingress start: its group is its own from then on
    assert adopt(dep) == []
    assert group_offsets(dep.bootstrap, dep.group, dep.source, 2) == {0: 6, 1: 2}


def test_a_new_deployment_takes_nothing_from_the_shared_group(dep: Deployment) -> None:
    # another deployment (before groups were per deployment) read the same topic
    set_group_offsets(dep.bootstrap, SHARED_INGRESS_GROUP, dep.source, {0: 4, 1: 4})
    assert adopt(dep) == []  # its first ingress start: its group recorded
    # it ran, received events and produced them, committed nothing yet (stopped before
    # its first commit), and starts again: still nothing of the shared group's
    dep.produce(dep.keys.topic("a"), 0, [event(1), event(2)])
    dep.r.hset(dep.keys.ingress_counts, mapping={"received": 2})
    assert adopt(dep) == []
    assert group_offsets(dep.bootstrap, dep.group, dep.source, 2) == {}
    # nor does its move to the entry step read the shared group's commits
    dep.r.hset(dep.keys.committed("a"), mapping={"0": 2, "1": 0})  # processed what it sent
    dep.r.set(dep.keys.admission_site, "ingress")
    assert dep.resolve("entry") == "entry"
    assert dep.progress() == {0: 0, 1: 0}  # the source from its start


def test_a_deployment_from_before_that_received_nothing_takes_nothing(dep: Deployment) -> None:
    dep.produce(dep.keys.topic("a"), 0, [DECLARATION])  # declarations only
    set_group_offsets(dep.bootstrap, SHARED_INGRESS_GROUP, dep.source, {0: 4, 1: 4})
    assert adopt(dep) == []
    assert group_offsets(dep.bootstrap, dep.group, dep.source, 2) == {}
