"""What every service app shares: the faust app, dead-lettering, heartbeats, and the
/metrics and /health pages (Prometheus registry injected, never global)."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from elastic_sps.contracts.action import DeadLetter
from elastic_sps.contracts.base import ContractError, R, decode, encode
from elastic_sps.io.connections import KafkaSecurity
from elastic_sps.io.embedded import free_port
from elastic_sps.io.kafka_admin import ensure_topics, service_group
from elastic_sps.io.knowledge_base import Keys
from elastic_sps.services.faust_fetch import app_class
from elastic_sps.settings import ServiceSettings

log = logging.getLogger("sps.service")


class ServiceMetrics:
    def __init__(self, service: str, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.records_in = Counter("sps_records_in", "records consumed", ["topic"], registry=r)
        self.records_out = Counter("sps_records_out", "records produced", ["topic"], registry=r)
        self.deadlettered = Counter(
            "sps_dead_lettered", "records sent to the dead-letter topic", ["topic"], registry=r
        )
        self.interval_lag = Gauge(
            "sps_interval_lag_seconds",
            "now minus the close of the interval last handled",
            registry=r,
        )
        self.last_record_at = 0.0
        self.service = service


def crash(service: str, topic: str, event: Any) -> None:
    """A faust agent that raises stops consuming while its worker stays up (a service that
    looks alive and does nothing); a hard exit after the log is what gets it restarted."""
    log.exception("%s: a bug handling a record of %s (not bad input): exiting", service, topic)
    logging.shutdown()
    os._exit(70)  # EX_SOFTWARE


SHUTDOWN_GRACE_S = 5.0


def _arm_sigterm_watchdog(service: str) -> None:
    """faust's graceful stop waits on its broker (consumer leave, producer flush) and hangs
    when the broker is gone; compose and ``up`` expect a service to be gone within
    seconds of SIGTERM. So SIGTERM starts a watchdog that exits after a grace period, then
    asks faust for its own graceful stop (SIGINT). Replaces faust's SIGTERM handler on the
    running loop, hence called from a task once the worker runs."""
    import asyncio
    import signal
    import threading

    def on_sigterm() -> None:
        def expire() -> None:
            time.sleep(SHUTDOWN_GRACE_S)
            log.warning("%s: not stopped %.0f s after SIGTERM: exiting", service, SHUTDOWN_GRACE_S)
            os._exit(0)

        threading.Thread(target=expire, name="sigterm-watchdog", daemon=True).start()
        os.kill(os.getpid(), signal.SIGINT)

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, on_sigterm)


def _data_dir(settings: ServiceSettings, name: str) -> str:
    """faust's data folder: faust's default is ``<app>-data`` in the working directory,
    which would leave a folder per faust app in the user's project after every `demo`."""
    if settings.state_dir:
        Path(settings.state_dir).mkdir(parents=True, exist_ok=True)  # faust makes one level
        return str(Path(settings.state_dir) / f"sps-{name}-data")
    return tempfile.mkdtemp(prefix=f"sps-{name}-")


class ServiceApp:
    """A faust app with the service's ops pages and a dead-letter sink."""

    def __init__(
        self,
        name: str,
        settings: ServiceSettings,
        metrics: ServiceMetrics,
        health: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.name = name
        self.settings = settings
        self.metrics = metrics
        self.keys = Keys(settings.key_prefix)
        port = settings.web_port or free_port()
        self.web_port = port
        self.app = app_class(settings.kafka_fetch_max_wait_ms)(
            service_group(name),
            broker=f"kafka://{settings.kafka_bootstrap_servers}",
            broker_credentials=KafkaSecurity().faust_credentials(),
            store="memory://",
            value_serializer="raw",
            key_serializer="raw",
            web_host=settings.web_host,
            web_port=port,
            datadir=_data_dir(settings, name),
            topic_partitions=1,
            topic_allow_declare=True,
            broker_session_timeout=settings.kafka_session_timeout_s,
            broker_heartbeat_interval=1.0,
            consumer_auto_offset_reset="earliest",
            producer_acks=-1,
            # One record per batch: the embedded (Tansu) broker mis-handles multi-record
            # batches; control topics carry a few records/s.
            producer_max_batch_size=1,
            producer_linger=0.0,
        )
        self._health = health or (lambda: {})
        self.deadletter_topic = self.topic(settings.topics.deadletter)
        app = self.app

        @app.task
        async def exit_promptly_on_sigterm() -> None:
            _arm_sigterm_watchdog(name)

        @app.page("/metrics")
        async def metrics_page(web: Any, request: Any) -> Any:
            return web.bytes(generate_latest(metrics.registry), content_type="text/plain")

        @app.page("/health")
        async def health_page(web: Any, request: Any) -> Any:
            body = {"service": name, "status": "ok", "last_record_at": metrics.last_record_at}
            body.update(self._health())
            # a degraded service (execute retrying Redis) is not healthy to compose/k8s
            return web.json(body, status=200 if body["status"] == "ok" else 503)

    def consume(
        self, topic_name: str, model: type[R], handle: Callable[[R], Awaitable[None]]
    ) -> None:
        """An agent on ``topic_name``: each record is decoded to ``model`` and handed to
        ``handle``; what does not decode, or what ``handle`` refuses as not fitting its
        contract (``ContractError``), goes to the dead-letter topic with the reason, and
        the stream goes on. Anything else is a bug, never bad input: it is logged with the
        record and the process exits, so the supervisor (or compose) restarts it and the
        uncommitted record is read again."""

        @self.app.agent(self.topic(topic_name), name=f"sps-{self.name}-{topic_name}")
        async def agent(stream: Any) -> None:
            async for event in stream.events():
                self.consumed(topic_name)
                try:
                    await handle(decode(event.value, model))
                except ContractError as exc:
                    await self.dead_letter(event, str(exc))
                except Exception:
                    crash(self.name, topic_name, event)

    def topic(self, name: str) -> Any:
        return self.app.topic(name, value_type=bytes, key_type=bytes, value_serializer="raw")

    async def dead_letter(self, event: Any, reason: str) -> None:
        msg = event.message
        raw = (
            event.value if isinstance(event.value, bytes | bytearray) else str(event.value).encode()
        )
        rec = DeadLetter.of(
            self.name,
            msg.topic,
            bytes(raw),
            reason,
            partition=msg.partition,
            offset=msg.offset,
        )
        await self.deadletter_topic.send(key=self.name.encode(), value=encode(rec))
        self.metrics.deadlettered.labels(msg.topic).inc()

    async def send(self, topic: Any, key: str, value: bytes) -> None:
        await topic.send(key=key.encode(), value=value)
        self.metrics.records_out.labels(topic.get_topic_name()).inc()

    def consumed(self, topic: str) -> None:
        self.metrics.records_in.labels(topic).inc()
        self.metrics.last_record_at = time.time()

    def run(self) -> None:
        topics = self.settings.topics
        # not the default source topic: its partitions are the admission site's to make
        # (``las.site``), and this service does not read it
        control = [t for t in topics.control() if t != topics.ingress]
        ensure_topics(self.settings.kafka_bootstrap_servers, control)
        print(
            f"{self.name}: metrics at http://{self.settings.web_host}:{self.web_port}/metrics",
            file=sys.stderr,
            flush=True,
        )
        sys.argv = [sys.argv[0], "worker", "-l", "warn"]
        self.app.main()
