"""faust's aiokafka transport with a configurable broker fetch wait.

faust-streaming 0.15 builds its worker consumer with ``fetch_max_wait_ms=1500``, fixed
(``faust/transport/drivers/aiokafka.py``). A broker that answers a fetch only when that
wait runs out, or on its own timer, delays every record by up to the wait (the embedded
Tansu broker does; its per-hop figures: docs/measurements.md). The control loop crosses
four faust hops (metrics -> monitor -> analyze -> plan -> execute), so the fixed wait
alone puts a plan about a second behind its interval. A real Kafka broker answers as soon
as a record is there whatever the wait; a short wait costs it only more fetch requests
from a handful of control-plane consumers.
"""

from __future__ import annotations

from typing import Any, ClassVar

import faust
from faust.transport.drivers import aiokafka as faust_aiokafka


class _ConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    fetch_max_wait_ms: ClassVar[int] = 1500

    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        # aiokafka hands this to its Fetcher at start(), which has not run yet
        consumer._fetch_max_wait_ms = self.fetch_max_wait_ms
        return consumer


def app_class(fetch_max_wait_ms: int) -> type[faust.App]:
    """A faust.App whose worker consumers wait at most ``fetch_max_wait_ms`` per fetch."""

    class ConsumerThread(_ConsumerThread):
        pass

    ConsumerThread.fetch_max_wait_ms = fetch_max_wait_ms

    class FastFetchConsumer(faust_aiokafka.Consumer):
        def _new_consumer_thread(self) -> Any:
            return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    class Transport(faust_aiokafka.Transport):
        Consumer = FastFetchConsumer

    class App(faust.App):
        def _new_transport(self) -> Any:
            return Transport(self.conf.broker_consumer, self)

    return App
