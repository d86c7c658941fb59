"""faust fixes its consumers' fetch wait at 1,500 ms; the services' apps set their own."""

import asyncio

import pytest

from elastic_sps.services.faust_fetch import app_class

pytestmark = pytest.mark.unit


def test_worker_consumer_takes_the_configured_fetch_wait() -> None:
    app = app_class(50)("sps-fetch-test", broker="kafka://127.0.0.1:1", store="memory://")

    async def build() -> int:
        consumer = app.consumer._thread._create_worker_consumer(app.transport)
        return int(consumer._fetch_max_wait_ms)

    assert asyncio.run(build()) == 50
