"""Running the dataplane on a Spark cluster (``spark://``, ``local-cluster[…]``, ``k8s://``).

In ``local[N]`` the tasks run in Python workers forked beside the driver, with the
driver's interpreter and the project already importable. On a cluster an executor's
Python has the dependencies (the image, or a packed environment via ``spark.archives``)
but not necessarily this project, and may be another Python: so the job ships the
project to the executors itself (``ship_project``) and, before starting any query,
asks every executor what it runs (``check_executors``), failing with one clear message
instead of a stack trace from inside the first micro-batch.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import socket
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("sps.dataplane")

# What a replica imports beyond the project: an executor without one of these cannot run.
REQUIRED_MODULES = ("confluent_kafka", "redis", "pydantic", "pydantic_settings", "yaml", "numpy")
# Settings an executor needs from the driver's environment (credentials and TLS included):
# the replicas build their own Kafka and Redis clients.
FORWARDED_ENV_PREFIXES = ("SPS_KAFKA_", "SPS_REDIS_")


class ClusterMismatch(RuntimeError):
    """The executors cannot run this driver's job (Python, Spark or a missing module)."""


def is_cluster(master: str) -> bool:
    """``local`` and ``local[…]`` run in the driver's JVM; everything else has executors."""
    return not (master == "local" or master.startswith("local["))


def executor_id() -> str:
    """``host:pid`` of the JVM that runs this Python worker (its nearest ``java``
    ancestor), so a test or the metrics can tell executors apart; Spark gives a Python
    worker no executor id of its own."""
    pid = os.getpid()
    for _ in range(8):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        if stat[stat.index("(") + 1 : stat.rindex(")")] == "java":
            return f"{socket.gethostname()}:{pid}"
        pid = int(stat[stat.rindex(")") + 2 :].split()[1])  # the field after the state
        if pid <= 1:
            break
    return socket.gethostname()


def user_code_roots(modules: list[str]) -> list[Path]:
    """The folders (packages) or files (modules) the user's operator code comes from,
    by top-level name: what an executor must import. The project's own are shipped
    anyway; a module that cannot be found is the driver's load error, not ours."""
    roots: list[Path] = []
    for top in sorted({m.split(".")[0] for m in modules} - {"elastic_sps"}):
        spec = importlib.util.find_spec(top)
        if spec is None or spec.origin in (None, "built-in", "frozen"):
            continue
        if spec.submodule_search_locations:
            roots.extend(Path(p) for p in spec.submodule_search_locations)
        else:
            roots.append(Path(spec.origin))
    return roots


def project_zip(folder: Path, user_modules: list[str] | None = None) -> Path:
    """The ``elastic_sps`` package (code and data files such as the built-in topologies,
    ``elastic_sps.services`` inside it, wherever a checkout keeps that folder) and the
    user's operator packages as one zip for ``addPyFile``; the executors then import the
    very code the driver runs, whatever their image holds."""
    import elastic_sps
    import elastic_sps.services

    out = folder / "elastic_sps_project.zip"
    library = Path(elastic_sps.__file__).parent
    services = Path(elastic_sps.services.__file__).parent
    arcs = [(library, Path("elastic_sps")), (services, Path("elastic_sps/services"))]
    arcs += [(root, Path(root.name)) for root in user_code_roots(user_modules or [])]
    written: set[Path] = set()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for root, arc in arcs:
            if root.is_file():
                zf.write(root, arc)
                continue
            for path in sorted(root.rglob("*")):
                name = arc / path.relative_to(root)
                if path.is_file() and "__pycache__" not in path.parts and name not in written:
                    zf.write(path, name)
                    written.add(name)
    return out


def ship_project(spark: Any, user_modules: list[str] | None = None) -> Path:
    path = project_zip(Path(tempfile.mkdtemp(prefix="sps-pyfiles-")), user_modules)
    spark.sparkContext.addPyFile(str(path))
    return path


def forwarded_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """``spark.executorEnv.*`` entries for the settings the replicas read themselves."""
    env = os.environ if environ is None else environ
    return {
        f"spark.executorEnv.{k}": v for k, v in env.items() if k.startswith(FORWARDED_ENV_PREFIXES)
    }


@dataclass(frozen=True)
class ExecutorReport:
    executor: str
    python: str
    pyspark: str
    missing: tuple[str, ...]


def _probe(_: Any) -> Any:
    import pyspark

    missing = tuple(m for m in REQUIRED_MODULES if importlib.util.find_spec(m) is None)
    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    yield (executor_id(), py, pyspark.__version__, missing)


def mismatches(driver_python: str, driver_spark: str, reports: list[ExecutorReport]) -> list[str]:
    """What stops the job, one line per executor and problem (empty: all fit)."""
    problems = []
    minor = ".".join(driver_spark.split(".")[:2])
    for r in reports:
        if r.python != driver_python:
            problems.append(f"{r.executor}: Python {r.python}, driver {driver_python}")
        if ".".join(r.pyspark.split(".")[:2]) != minor:
            problems.append(f"{r.executor}: Spark {r.pyspark}, driver's pyspark {driver_spark}")
        if r.missing:
            problems.append(f"{r.executor}: cannot import {', '.join(r.missing)}")
    return problems


def check_executors(spark: Any, probes: int) -> list[ExecutorReport]:
    """Run one small task per expected slot and compare each executor with the driver."""
    import pyspark

    driver_python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    try:
        rows = spark.sparkContext.parallelize(range(probes), probes).mapPartitions(_probe).collect()
    except Exception as exc:  # Spark's own message for a Python mismatch is deep inside
        text = str(exc)
        line = next((ln for ln in text.splitlines() if "PYTHON_VERSION_MISMATCH" in ln), "")
        raise ClusterMismatch(
            f"the executors could not run a Python task for driver Python {driver_python}"
            f"{': ' + line.strip() if line else ''} ({type(exc).__name__})"
        ) from exc
    reports = sorted({ExecutorReport(e, p, v, tuple(m)) for e, p, v, m in rows}, key=str)
    problems = mismatches(driver_python, pyspark.__version__, reports)
    if spark.version.split(".")[:2] != pyspark.__version__.split(".")[:2]:
        problems.append(f"cluster Spark {spark.version}, driver's pyspark {pyspark.__version__}")
    if problems:
        raise ClusterMismatch("the executors cannot run this job: " + "; ".join(problems))
    log.info("executors ready: %s", ", ".join(r.executor for r in reports))
    return reports
