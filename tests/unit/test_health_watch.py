"""``up``'s watch of its running services' health (``ensemble.health_watch``), against a
real HTTP server answering /health as a service does."""

from __future__ import annotations

import http.server
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from elastic_sps.services.ensemble.health_watch import (
    EVERY_S,
    REPORT_AFTER_S,
    STARTING_REPORT_AFTER_S,
    HealthWatch,
)

pytestmark = pytest.mark.unit


class Health(http.server.BaseHTTPRequestHandler):
    status = 503
    unhealthy_body = b'{"status": "degraded"}'

    def do_GET(self) -> None:
        body = b'{"status": "ok"}' if Health.status == 200 else Health.unhealthy_body
        self.send_response(Health.status)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@dataclass
class Service:
    name: str
    port: int | None

    def alive(self) -> bool:
        return True


@pytest.fixture
def port() -> Iterator[int]:
    server = http.server.HTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def test_a_service_unhealthy_long_enough_is_said_once_and_its_return_too(port, caplog):
    caplog.set_level(logging.WARNING, "sps.supervisor")
    watch, dataplane = HealthWatch(), [Service("dataplane", port)]
    Health.status = 503
    watch.check(dataplane, 100.0)  # first seen unhealthy: a warm-up may be shorter
    watch.check(dataplane, 100.0 + EVERY_S)
    assert caplog.messages == []
    watch.check(dataplane, 100.0 + REPORT_AFTER_S)
    watch.check(dataplane, 100.0 + REPORT_AFTER_S + EVERY_S)  # said once
    assert caplog.messages == [
        'dataplane unhealthy for 10 s (its /health: {"status": "degraded"}); see its log'
    ]
    Health.status = 200
    watch.check(dataplane, 100.0 + REPORT_AFTER_S + 2 * EVERY_S)
    assert caplog.messages[1:] == ["dataplane is healthy again"]


def test_a_short_dip_and_a_service_without_a_port_are_not_said(port, caplog):
    caplog.set_level(logging.WARNING, "sps.supervisor")
    watch = HealthWatch()
    services = [Service("plan", port), Service("probe", None)]
    Health.status = 503
    watch.check(services, 0.0)
    Health.status = 200
    watch.check(services, EVERY_S)
    Health.status = 503
    watch.check(services, 2 * EVERY_S)  # unhealthy again: counted from here
    watch.check(services, 2 * EVERY_S + REPORT_AFTER_S - 1)
    assert caplog.messages == []


def test_a_service_that_says_it_is_starting_has_a_boots_allowance(port, caplog):
    """A dataplane booting Spark (or waiting for another holder's first batch) says
    "starting": said only once that has lasted `STARTING_REPORT_AFTER_S` (120 s)."""
    caplog.set_level(logging.WARNING, "sps.supervisor")
    watch, standby = HealthWatch(), [Service("dataplane-standby", port)]
    Health.status, Health.unhealthy_body = 503, b'{"status": "starting", "phase": "waiting"}'
    try:
        watch.check(standby, 0.0)
        watch.check(standby, 100.0)
        assert caplog.messages == []
        watch.check(standby, STARTING_REPORT_AFTER_S)
        assert caplog.messages == [
            "dataplane-standby unhealthy for 120 s (its /health: "
            '{"status": "starting", "phase": "waiting"}); see its log'
        ]
    finally:
        Health.unhealthy_body = b'{"status": "degraded"}'
