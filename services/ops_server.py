"""The ops server of the services that are not faust apps (ingress, dataplane): /metrics
is prometheus_client's own WSGI app on the service's injected registry, and /health (200
or 503 with a JSON body) is the one route added to it. (The faust services serve the same
two routes through faust's web server, ``elastic_sps.services.runtime``.)"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

log = logging.getLogger("sps.ops")


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # scrapes are not news
        pass


def serve(
    service: str,
    host: str,
    port: int,
    registry: CollectorRegistry,
    check: Callable[[], tuple[bool, dict[str, Any]]],
) -> WSGIServer:
    """Serve ``registry`` on /metrics and ``check()`` (healthy?, body) on /health, on a
    daemon thread; port 0 picks a free one (``server.server_port``)."""
    metrics_app = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == "/health":
            ok, body = check()
            start_response(
                "200 OK" if ok else "503 Service Unavailable",
                [("Content-Type", "application/json")],
            )
            return [json.dumps(body).encode()]
        return metrics_app(environ, start_response)

    server = make_server(host, port, app, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name=f"{service}-web", daemon=True).start()
    log.info("%s: metrics and health on http://%s:%d", service, host, server.server_port)
    return server
