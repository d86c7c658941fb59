from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import servers


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    with servers.redis_server() as url:
        yield url


@pytest.fixture
def redis_client(redis_url):
    """A client on a flushed database: the server lives per session, state per test."""
    import redis

    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    yield client
    client.close()


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    with servers.kafka_broker() as bootstrap:
        yield bootstrap


KINDS = ("unit", "integration", "e2e", "compose")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test says its kind: ``make test-unit`` and friends select by marker, so a
    test without one would be left out of each of them silently."""
    unmarked = [i.nodeid for i in items if not any(i.get_closest_marker(k) for k in KINDS)]
    if unmarked:
        raise pytest.UsageError(
            f"tests without a kind marker ({', '.join(KINDS)}): " + ", ".join(unmarked)
        )
