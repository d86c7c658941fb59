"""Start the services as separate processes for integration tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from elastic_sps.io.embedded import free_port


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
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
