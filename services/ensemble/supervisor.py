"""``elastic-sps up``: the broker, redis-server, Spark and every service as processes on
one machine, healthy before it returns, all stopped on exit (no orphans)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from shared import embedded
from shared.embedded import PrerequisiteError, free_port

SERVICES = ("ingress", "monitor", "analyze", "plan", "execute", "dataplane")


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    port: int | None
    log: Path

    def alive(self) -> bool:
        return self.proc.poll() is None


@dataclass
class Ensemble:
    bootstrap: str
    redis_url: str
    run_dir: Path
    env: dict[str, str]
    children: list[Child] = field(default_factory=list)

    def urls(self) -> dict[str, str]:
        return {c.name: f"http://127.0.0.1:{c.port}/metrics" for c in self.children if c.port}

    def start(self, name: str) -> Child:
        port = free_port() if name != "dataplane" else None
        env = {**self.env, **({"SPS_WEB_PORT": str(port)} if port else {})}
        log = self.run_dir / f"{name}.log"
        proc = subprocess.Popen(
            [sys.executable, "-m", f"services.{name}"],
            env=env,
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        child = Child(name, proc, port, log)
        self.children.append(child)
        return child

    def healthy(self, child: Child) -> bool:
        if child.name == "dataplane":
            import redis

            r = redis.Redis.from_url(self.redis_url)
            return bool(r.exists(f"{self.env['SPS_KEY_PREFIX']}:dp:runs"))
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{child.port}/health", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def wait_healthy(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        pending = list(self.children)
        while pending:
            for c in list(pending):
                if not c.alive():
                    raise RuntimeError(f"{c.name} exited:\n{c.log.read_text()[-3000:]}")
                if self.healthy(c):
                    pending.remove(c)
            if time.monotonic() > deadline:
                raise TimeoutError(f"not healthy after {timeout}s: {[c.name for c in pending]}")
            time.sleep(0.3)

    def stop(self) -> None:
        for c in reversed(self.children):
            if c.alive():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(c.proc.pid, signal.SIGTERM)
        for c in reversed(self.children):
            try:
                c.proc.wait(30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(c.proc.pid, signal.SIGKILL)
                c.proc.wait(10)


def check_prerequisites() -> None:
    if shutil.which("java") is None:
        raise PrerequisiteError(
            "Java is missing (Spark needs it): apt-get install "
            "openjdk-17-jre-headless, or run `make install`"
        )
    if not os.environ.get("REDIS_URL") and shutil.which("redis-server") is None:
        raise PrerequisiteError(
            "redis-server is missing: apt-get install redis-server, or set "
            "REDIS_URL to a running server"
        )


@contextlib.contextmanager
def up(
    topology: str,
    run_dir: Path,
    policy: str = "pa-sps",
    predictor: str = "lr",
    tau_ms: float | None = None,
    td: float = 1.0,
    extra_env: dict[str, str] | None = None,
) -> Iterator[Ensemble]:
    """Start everything; stop everything on exit, whatever happened."""
    from services.ensemble.replay import KEY_FIELDS
    from shared import topology as topology_mod
    from shared.kafka_admin import ensure_topics
    from shared.settings import ServiceSettings
    from shared.topics import Topics

    check_prerequisites()
    topo = topology_mod.load(topology)
    run_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or stack.enter_context(
            embedded.kafka_broker()
        )
        redis_url = os.environ.get("REDIS_URL") or stack.enter_context(embedded.redis_server())
        prefix = f"run{int(time.time())}"
        env = {
            **os.environ,
            "SPS_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "SPS_REDIS_URL": redis_url,
            "SPS_KEY_PREFIX": prefix,
            "SPS_TOPOLOGY": topology,
            "SPS_TD": str(td),
            "SPS_POLICY": policy,
            "SPS_PREDICTOR": predictor,
            "SPS_KEY_FIELD": KEY_FIELDS.get(topo.name, "key"),
            "SPS_CHECKPOINT_DIR": str(run_dir / "checkpoints"),
            # wait-bound operators: capacity follows replicas on any laptop (README)
            "SPS_COST_MODE": os.environ.get("SPS_COST_MODE", "wait"),
            **(extra_env or {}),
        }
        if tau_ms is not None:
            env["SPS_TAU_MS"] = str(tau_ms)
        topics = ServiceSettings().topics
        ensure_topics(bootstrap, topics.control())
        for op in topo.operators:
            ensure_topics(bootstrap, [Topics.operator(op.name)], partitions=op.max_replicas)
        ens = Ensemble(bootstrap, redis_url, run_dir, env)
        stack.callback(ens.stop)
        for name in SERVICES:
            ens.start(name)
        ens.wait_healthy()
        time.sleep(4)  # consumer-group joins settle (about 3 s on the embedded broker)
        yield ens
