"""Real servers for the tests: a redis-server and a Kafka-protocol broker.

One chooser: an explicit URL from the environment wins; otherwise testcontainers when a
Docker engine answers; otherwise local processes (redis-server, the embedded broker).
The same test code runs against either.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator


def docker_available() -> bool:
    if os.environ.get("ELASTIC_SPS_NO_DOCKER"):
        return False
    try:
        import docker

        docker.from_env(timeout=3).ping()
        return True
    except Exception:
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(host: str, port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {host}:{port} after {timeout}s")


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    """Yield a redis:// URL of a running server."""
    if url := os.environ.get("REDIS_URL"):
        yield url
        return
    if docker_available():
        from testcontainers.redis import RedisContainer

        with RedisContainer("redis:7") as c:
            yield f"redis://{c.get_container_host_ip()}:{c.get_exposed_port(6379)}/0"
        return
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server not found: `make install` apt-installs it")
    port = free_port()
    with tempfile.TemporaryDirectory() as d:
        proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                d,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_port("127.0.0.1", port)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            proc.terminate()
            proc.wait(10)
