"""``admission: auto`` against a real broker and redis-server
(``elastic_sps.las.site.resolve``): a missing source topic is created with a partition
per entry replica and admitted at the entry step; a user's topic with fewer partitions
than the entry pool keeps the ingress, and is left as it was; the first decision is
recorded, and a later start decides the same even after the topic changed; the demo's
drain reads the recorded site (it watches the source's backlog where the entry step
admits)."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest
import redis
from confluent_kafka.admin import AdminClient, NewPartitions

from elastic_sps.io.connections import kafka_config
from elastic_sps.io.kafka_admin import ensure_topics, partition_count, topic_ends
from elastic_sps.las.site import resolve
from elastic_sps.services.ensemble.drain import admits_at_entry
from elastic_sps.settings import ServiceSettings
from tests.support.pipelines import one_operator

pytestmark = pytest.mark.integration


def pipeline(topic: str) -> Any:
    return one_operator(topic, 3)


def settings(bootstrap: str, redis_url: str, admission: str = "auto", prefix: str = "") -> Any:
    return ServiceSettings(
        kafka_bootstrap_servers=bootstrap,
        redis_url=redis_url,
        key_prefix=prefix or f"site{uuid.uuid4().hex[:8]}",
        admission=admission,
    )


def fresh_topic() -> str:
    return f"auto-{uuid.uuid4().hex[:8]}"


def test_asking_a_missing_topics_partitions_does_not_make_it(kafka_bootstrap):
    # the broker creates a topic a producer's metadata request names (Apache Kafka's
    # default): with one partition, which a pool of several could not use
    topic = fresh_topic()
    assert partition_count(kafka_bootstrap, topic) == 0
    assert topic_ends(kafka_bootstrap, topic) == {}
    assert partition_count(kafka_bootstrap, topic) == 0


def test_a_missing_source_topic_is_made_for_the_entry_step(kafka_bootstrap, redis_url):
    topic = fresh_topic()
    assert resolve(settings(kafka_bootstrap, redis_url), pipeline(topic)) == "entry"
    assert partition_count(kafka_bootstrap, topic) == 3


def test_a_topic_with_too_few_partitions_keeps_the_ingress_and_is_left_as_it_was(
    kafka_bootstrap, redis_url
):
    topic = fresh_topic()
    ensure_topics(kafka_bootstrap, [topic], partitions=2)
    assert resolve(settings(kafka_bootstrap, redis_url), pipeline(topic)) == "ingress"
    assert partition_count(kafka_bootstrap, topic) == 2


def test_the_first_decision_holds_for_every_later_start(kafka_bootstrap, redis_url):
    topic = fresh_topic()
    ensure_topics(kafka_bootstrap, [topic], partitions=2)
    first = settings(kafka_bootstrap, redis_url)
    assert resolve(first, pipeline(topic)) == "ingress"
    # the user gives the topic enough partitions while the deployment runs: a service
    # restarted now still finds the ingress admitting, as the running ones do
    admin = AdminClient(kafka_config(kafka_bootstrap))
    for fut in admin.create_partitions([NewPartitions(topic, 4)]).values():
        fut.result()
    assert partition_count(kafka_bootstrap, topic, wait_s=15.0) == 4
    assert resolve(first, pipeline(topic)) == "ingress"
    # a new deployment (another key prefix) decides afresh
    assert resolve(settings(kafka_bootstrap, redis_url), pipeline(topic)) == "entry"


def test_a_named_site_is_taken_as_named(kafka_bootstrap, redis_url):
    topic = fresh_topic()
    for site in ("ingress", "entry"):
        assert resolve(settings(kafka_bootstrap, redis_url, site), pipeline(topic)) == site
    # nothing made for a named site (all topics listed: asking for one may create it)
    listed = AdminClient(kafka_config(kafka_bootstrap)).list_topics(timeout=15).topics
    assert topic not in listed


def test_the_demo_s_drain_knows_where_auto_admitted(kafka_bootstrap, redis_url):
    # the drain watches the source topic's backlog when the entry step admits: asked for
    # by name, or decided by auto and recorded by the services (not asked: auto)
    r = redis.Redis.from_url(redis_url)
    for topic, want in ((fresh_topic(), True), (None, False)):
        s = settings(kafka_bootstrap, redis_url)
        if topic is None:  # a topic of too few partitions: auto keeps the ingress
            topic = fresh_topic()
            ensure_topics(kafka_bootstrap, [topic], partitions=2)
        resolve(s, pipeline(topic), r)
        for env in ({}, {"SPS_ADMISSION": "auto"}):
            assert admits_at_entry(SimpleNamespace(env=env), r, s.key_prefix) is want
    fresh = f"site{uuid.uuid4().hex[:8]}"  # nothing decided yet
    assert not admits_at_entry(SimpleNamespace(env={}), r, fresh)
    assert admits_at_entry(SimpleNamespace(env={"SPS_ADMISSION": "entry"}), r, fresh)
    assert not admits_at_entry(SimpleNamespace(env={"SPS_ADMISSION": "ingress"}), r, fresh)


def test_the_drain_counts_what_the_entry_step_read_and_has_not_yet_given_a_fate(
    redis_client,
):
    """100 read at the entry step, 60 admitted, 30 shed, 5 dead-lettered (2 of the
    admitted unkeyed): 5 without a counted fate yet; once they are admitted, none."""
    from elastic_sps.io.knowledge_base import KnowledgeBase
    from elastic_sps.services.ensemble.drain import uncounted_at_entry

    kb = KnowledgeBase(redis_client, "t-drain")
    counts = {"received": 100, "admitted": 60, "shed": 30, "dead_lettered": 5, "unkeyed": 2}
    kb.set_ingress_counts(counts)
    assert uncounted_at_entry(kb.ingress_counts()) == 5
    kb.set_ingress_counts({**counts, "admitted": 65})
    assert uncounted_at_entry(kb.ingress_counts()) == 0
