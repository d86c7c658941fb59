"""Real servers for the tests: a redis-server and an Apache Kafka broker.

One chooser, ``SPS_TEST_SERVERS``:

* ``local`` (the default): local processes (Debian's redis-server, Apache Kafka from its
  Maven jars: ``elastic_sps.io.embedded``);
* ``containers``: testcontainers, from the images ``compose/stack.sh build`` builds
  locally (``elastic-sps/redis:7``, ``elastic-sps/kafka:4.1.1``; override with
  ``SPS_TEST_REDIS_IMAGE`` / ``SPS_TEST_KAFKA_IMAGE``) on the engine ``DOCKER_HOST``
  names; Ryuk is off (its image cannot be pulled without a registry) and the fixture
  removes its containers itself.

An explicit address (SPS_EXTERNAL_REDIS, SPS_EXTERNAL_KAFKA) wins over both. The same tests
run against either (``make test`` runs the integration tests both ways where an engine
can run).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from elastic_sps.io import embedded
from elastic_sps.io.local_settings import LocalSettings

REDIS_IMAGE = os.environ.get("SPS_TEST_REDIS_IMAGE", "elastic-sps/redis:7")
KAFKA_IMAGE = os.environ.get("SPS_TEST_KAFKA_IMAGE", "elastic-sps/kafka:4.1.1")


def mode() -> str:
    chosen = os.environ.get("SPS_TEST_SERVERS", "local")
    if chosen not in ("local", "containers"):
        raise ValueError(f"SPS_TEST_SERVERS must be local or containers, got {chosen!r}")
    return chosen


def docker_available() -> bool:
    try:
        import docker

        docker.from_env(timeout=3).ping()
        return True
    except Exception:
        return False


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    if url := LocalSettings().external_redis:
        yield url
        return
    if mode() == "containers":
        os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
        from testcontainers.community.redis import RedisContainer

        with RedisContainer(REDIS_IMAGE) as c:
            yield f"redis://{c.get_container_host_ip()}:{c.get_exposed_port(6379)}/0"
        return
    with embedded.redis_server() as url:
        yield url


@contextlib.contextmanager
def kafka_broker() -> Iterator[str]:
    if bootstrap := LocalSettings().external_kafka:
        yield bootstrap
        return
    if mode() == "containers":
        with kafka_container() as bootstrap:
            yield bootstrap
        return
    with embedded.kafka_broker() as bootstrap:
        yield bootstrap


@contextlib.contextmanager
def kafka_container() -> Iterator[str]:
    """The compose file's Kafka image. Its host listener must advertise the port the
    host reaches it on, so that port is chosen first and bound, not mapped at random."""
    os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
    from testcontainers.core.container import DockerContainer

    port = embedded.free_port()
    container = (
        DockerContainer(KAFKA_IMAGE)
        .with_bind_ports(9094, port)
        .with_env("KAFKA_CONTROLLER_HOST", "localhost")
        .with_env(
            "KAFKA_ADVERTISED_LISTENERS", f"INTERNAL://localhost:9092,HOST://127.0.0.1:{port}"
        )
    )
    with container:
        bootstrap = f"127.0.0.1:{port}"
        embedded.wait_metadata(bootstrap, timeout=120)
        yield bootstrap
