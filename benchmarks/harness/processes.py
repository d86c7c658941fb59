"""The processes a benchmark starts (the services, a peer engine's workers) and the CPU
they spend, by role."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from elastic_sps.io.embedded import free_port
from elastic_sps.services.dataplane.daemon import DAEMONS

__all__ = [
    "ROLES", "ServiceProcess", "cpu_at_rest", "cpu_seconds", "cpu_since", "free_port", "spawn"
]  # fmt: skip

PROBE = "probe"  # the machine's speed probe (``machine``): measures, is not measured
# What each process is, from its command line (first match wins).
ROLES: tuple[tuple[str, str], ...] = (
    ("benchmarks.harness.machine", PROBE),
    ("quix_nexmark.py", "quix-streams"),
    ("bytewax", "bytewax"),
    ("kafka.Kafka", "broker"),
    ("redis-server", "redis"),
    ("elastic_sps.services.ingress", "ingress"),
    *((f"-m {module}", "spark python workers") for module in DAEMONS),
    ("org.apache.spark", "spark driver JVM"),
    ("elastic_sps.services.dataplane", "dataplane driver (Python)"),
    ("quix_app.py", "quix-streams"),
    ("plain_loop.py", "plain-kafka"),
)


def _processes() -> dict[int, tuple[int, float, str]]:
    """Every process: pid -> (parent, CPU seconds (user + system, its own and its reaped
    children's), command line). The reaped children's count: a process that exits
    between two snapshots (a Spark Python worker) would take its CPU with it, and a
    difference of two snapshots could come out negative."""
    tick = os.sysconf("SC_CLK_TCK")
    procs: dict[int, tuple[int, float, str]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        cpu = sum(int(f) for f in fields[11:15]) / tick  # utime stime cutime cstime
        procs[int(d.name)] = (int(fields[1]), cpu, cmd)
    return procs


def role_of(cmd: str, roles: tuple[tuple[str, str], ...] = ROLES) -> str:
    """A process's role by its command line (``roles``: first match wins)."""
    return next((r for n, r in roles if n in cmd), "other")


def cpu_seconds(roles: tuple[tuple[str, str], ...] = ROLES) -> dict[str, float]:
    """CPU seconds so far of this benchmark's processes and their descendants (the broker,
    redis-server, the services, Spark's JVM and workers, a peer's processes), by role
    (``roles``; this process, the producer and the collectors, is "bench"; the speed
    probe is left out)."""
    me = os.getpid()
    procs = _processes()
    out: dict[str, float] = {}
    for pid, (_, cpu, cmd) in procs.items():
        up = pid
        while up not in (me, 0, 1) and up in procs:  # ours: descended from this process
            up = procs[up][0]
        if up != me:
            continue
        role = "bench" if pid == me else role_of(cmd, roles)
        if role == PROBE:
            continue
        out[role] = out.get(role, 0.0) + cpu
    return out


def cpu_since(before: dict[str, float]) -> dict[str, float]:
    """CPU seconds by role spent since ``before`` (an earlier ``cpu_seconds()``)."""
    return {k: v - before.get(k, 0.0) for k, v in cpu_seconds().items()}


def cpu_at_rest(seconds: float) -> dict[str, float]:
    """CPU seconds by role over the next ``seconds`` while nothing is fed (none for 0)."""
    if seconds <= 0:
        return {}
    before = cpu_seconds()
    time.sleep(seconds)
    return cpu_since(before)


def spawn(argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A peer engine's process, its output in a log file that outlives it (for a failed
    run)."""
    fd, _ = tempfile.mkstemp(prefix="sps-peer-", suffix=".log")
    return subprocess.Popen(argv, env={**os.environ, **env}, stdout=fd, stderr=fd)


class ServiceProcess:
    def __init__(self, name: str, env: dict[str, str]) -> None:
        self.name = name
        self.port = free_port()
        self.env = {**os.environ, **env, "SPS_WEB_PORT": str(self.port)}
        self.log = Path(tempfile.mkstemp(prefix=f"sps-{name}-", suffix=".log")[1])
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ServiceProcess:
        fh = self.log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", f"elastic_sps.services.{self.name}"],
            env=self.env,
            stdout=fh,
            stderr=fh,
            start_new_session=True,
        )
        return self

    def health(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=2) as r:
            return r.read().decode()

    def wait_healthy(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.log.read_text()[-2000:]}")
            if self.health():
                return
            time.sleep(0.2)
        raise TimeoutError(f"{self.name} not healthy: {self.log.read_text()[-2000:]}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
        """``sig`` to the service's own process, which stops what it started (the
        dataplane ends its epochs before Spark's JVM: ``dataplane/stopping.py``); SIGKILL
        after ``timeout``; then whatever of its process group outlived it."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
