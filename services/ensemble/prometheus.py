"""``up --prometheus``: a real Prometheus (Debian's package) scraping the embedded ensemble.

It runs compose's own ``prometheus.yml``: the same jobs, interval and paths, with each
job's targets replaced by the local port of the service of that name; jobs with nothing
of theirs running here (the Spark cluster, the exporters, Grafana) are left out.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from elastic_sps.io.embedded import PrerequisiteError, free_port, terminate, wait_port

COMPOSE_CONFIG = Path(__file__).resolve().parents[2] / "compose" / "prometheus" / "prometheus.yml"


def local_config(ports: dict[str, int], self_port: int, source: Path = COMPOSE_CONFIG) -> dict:
    """Compose's scrape config with every job pointed at ``127.0.0.1:<port>``."""
    doc = yaml.safe_load(source.read_text())
    ports = {**ports, "prometheus": self_port}
    jobs = []
    for job in doc["scrape_configs"]:
        if job["job_name"] in ports:
            local = {k: v for k, v in job.items() if not k.endswith("_sd_configs")}
            local["static_configs"] = [{"targets": [f"127.0.0.1:{ports[job['job_name']]}"]}]
            jobs.append(local)
    return {**doc, "scrape_configs": jobs}


@contextlib.contextmanager
def prometheus(run_dir: Path, ports: dict[str, int]) -> Iterator[str]:
    """Start ``prometheus`` on a free port for the ensemble's services; yield its URL."""
    binary = shutil.which("prometheus")
    if binary is None:
        raise PrerequisiteError(
            "prometheus not found: `make prometheus` (apt-get install prometheus)"
        )
    port = free_port()
    folder = run_dir / "prometheus"
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "prometheus.yml"
    config.write_text(yaml.safe_dump(local_config(ports, port), sort_keys=False))
    log = (folder / "prometheus.log").open("ab")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_port(port, timeout=60)
        yield f"http://127.0.0.1:{port}"
    finally:
        terminate(proc)


def targets(url: str) -> list[dict[str, Any]]:
    """Prometheus's view of its active targets (job, health, last error)."""
    with urllib.request.urlopen(f"{url}/api/v1/targets", timeout=5) as resp:
        doc = json.load(resp)
    return [
        {"job": t["labels"]["job"], "health": t["health"], "error": t.get("lastError", "")}
        for t in doc["data"]["activeTargets"]
    ]


def wait_all_up(url: str, timeout: float = 90) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        seen = targets(url)
        if seen and all(t["health"] == "up" for t in seen):
            return seen
        if time.monotonic() > deadline:
            raise TimeoutError(f"targets not all up after {timeout:.0f} s: {seen}")
        time.sleep(1)
