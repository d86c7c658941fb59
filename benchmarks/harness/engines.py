"""One way to start each engine the benchmarks compare, on a run's own topics: the
elastic-sps dataplane and ingress, quix-streams, Bytewax and a plain confluent-kafka loop.
A benchmark says what its pipeline is (a topology file, a peer's script and arguments);
starting, watching and stopping the processes is the same for every benchmark."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import redis

from benchmarks.harness.processes import ServiceProcess, free_port, spawn
from elastic_sps.io.kafka_admin import ensure_topics
from elastic_sps.io.knowledge_base import Keys, KnowledgeBase
from elastic_sps.model import topology

ROOT = Path(__file__).resolve().parents[2]
PEERS_DIR = ROOT / "benchmarks" / "peers"
PEERS_PYTHON = ROOT / ".venv-peers" / "bin" / "python"
PARTITIONS = 2  # on the input and between operators, for every engine
REPLICAS = 2

# Writes a run's topology file into a folder, on its input and output topics.
TopologyWriter = Callable[[Path, str, str], Path]


@dataclass
class Pipeline:
    """A running engine: where to write, where its outputs appear, how to stop it."""

    src: str
    dst: str
    procs: list[subprocess.Popen[bytes] | ServiceProcess] = field(default_factory=list)
    operators: tuple[str, ...] = ()  # elastic-sps: its pools (chained: the one chain)

    def alive(self) -> bool:
        return all(
            (p.alive() if isinstance(p, ServiceProcess) else p.poll() is None) for p in self.procs
        )

    def stop(self) -> None:
        for p in self.procs:
            if isinstance(p, ServiceProcess):
                p.stop(timeout=60)
            else:
                p.terminate()
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()


def _topics(bootstrap: str, tag: str) -> Pipeline:
    """A pipeline on the run's fresh input and output topics, nothing started yet."""
    pipe = Pipeline(f"{tag}.in", f"{tag}.out")
    ensure_topics(bootstrap, [pipe.src, pipe.dst], PARTITIONS)
    return pipe


def _pythonpath(folders: Sequence[Path]) -> str:
    return os.pathsep.join(str(f) for f in folders)


def peers_python() -> str:
    """The interpreter of the peers' venv (quix-streams pins an older confluent-kafka)."""
    if not PEERS_PYTHON.exists():
        raise SystemExit(f"{PEERS_PYTHON} is missing: make peers-venv")
    return str(PEERS_PYTHON)


def start_services(
    redis_url: str,
    tag: str,
    env: dict[str, str],
    operators: tuple[str, ...],
    replicas: int,
    fixed: bool = True,
) -> list[ServiceProcess]:
    """The dataplane (``replicas`` per operator; ``fixed``: held there, else as the active
    counts in Redis say), returned once it reports itself healthy (its tasks serve),
    and, once its query runs, the ingress (none with ``SPS_ADMISSION=entry``: the entry
    operator's replicas admit; with ``auto`` it stands aside where they do)."""
    r = redis.Redis.from_url(redis_url)
    for op in operators:
        r.set(Keys(tag).active(op), replicas)
    held = {"SPS_FIXED_REPLICAS": str(replicas)} if fixed else {}
    dataplane = ServiceProcess("dataplane", {**env, **held}).start()
    deadline = time.monotonic() + 240
    while not KnowledgeBase(r, tag).runs():
        if not dataplane.alive() or time.monotonic() > deadline:
            raise RuntimeError(dataplane.log.read_text()[-3000:])
        time.sleep(0.3)
    dataplane.wait_healthy(max(1.0, deadline - time.monotonic()))
    if env.get("SPS_ADMISSION") == "entry":
        return [dataplane]
    return [dataplane, ServiceProcess("ingress", env).start()]


def elastic_sps(
    bootstrap: str,
    redis_url: str,
    tag: str,
    write_topology: TopologyWriter,
    pythonpath: Sequence[Path],
    env: dict[str, str] | None = None,
    replicas: int = REPLICAS,
    fixed: bool = True,
) -> Pipeline:
    """The dataplane and ingress on the topology ``write_topology`` writes, ``replicas``
    per operator (``fixed``: held there; else the active counts in Redis decide, as the
    execute service writes them); ``env`` over the services' settings."""
    pipe = _topics(bootstrap, tag)
    folder = Path(tempfile.mkdtemp(prefix="sps-bench-"))
    topo_file = write_topology(folder, pipe.src, pipe.dst)
    settings = {
        "SPS_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "SPS_REDIS_URL": redis_url,
        "SPS_KEY_PREFIX": tag,
        "SPS_TOPOLOGY": str(topo_file),
        "SPS_CHECKPOINT_DIR": str(folder / "ckpt"),
        "SPS_TRACK_IDS": "false",  # the peers keep no id ledger
        "PYTHONPATH": _pythonpath([ROOT, *pythonpath]),
        **(env or {}),
    }
    pipe.operators = topology.load(topo_file).names  # chained: the one chain's name
    pipe.procs += start_services(redis_url, tag, settings, pipe.operators, replicas, fixed)
    return pipe


def quix_streams(
    bootstrap: str,
    tag: str,
    script: str,
    argv: Sequence[str],
    pythonpath: Sequence[Path],
    processes: int = PARTITIONS,
) -> Pipeline:
    """``processes`` copies of the quix-streams application ``script`` (in
    ``benchmarks/peers``), one consumer group, with ``argv`` after the topics."""
    pipe = _topics(bootstrap, tag)
    for _k in range(processes):
        cmd = [peers_python(), str(PEERS_DIR / script), "--bootstrap", bootstrap]
        cmd += ["--group", tag, "--src", pipe.src, "--dst", pipe.dst, *argv]
        pipe.procs.append(spawn(cmd, {"PYTHONPATH": _pythonpath(pythonpath)}))
    return pipe


def bytewax(
    bootstrap: str, tag: str, flow: str, env: dict[str, str], pythonpath: Sequence[Path]
) -> Pipeline:
    """The Bytewax dataflow ``flow`` (``module:attribute`` in ``benchmarks/peers``), a
    process per input partition (``bytewax.run -i/-a``), ``env`` its own settings; the
    run's broker, topics and group reach it as ``BYTEWAX_BOOTSTRAP``, ``_SRC``, ``_DST``
    and ``_GROUP``."""
    pipe = _topics(bootstrap, tag)
    env = {**env, "BYTEWAX_BOOTSTRAP": bootstrap, "BYTEWAX_SRC": pipe.src,
           "BYTEWAX_DST": pipe.dst, "BYTEWAX_GROUP": tag,
           "PYTHONPATH": _pythonpath([PEERS_DIR, *pythonpath])}  # fmt: skip
    addresses = ";".join(f"127.0.0.1:{free_port()}" for _ in range(PARTITIONS))
    for k in range(PARTITIONS):
        cmd = [peers_python(), "-m", "bytewax.run", flow, "-i", str(k), "-a", addresses]
        pipe.procs.append(spawn(cmd, env))
    return pipe


def plain_kafka(
    bootstrap: str, redis_url: str, tag: str, codes: Sequence[str], pythonpath: Sequence[Path]
) -> Pipeline:
    """A process per operator (``codes``: ``module:function``, in a line), each consuming
    up to 500, applying, producing and committing after delivery
    (``benchmarks/peers/plain_loop.py``); the topics between them its own."""
    names = [c.rsplit(":", 1)[1] for c in codes]
    topics = [f"{tag}.in", *(f"{tag}.{n}" for n in names)]
    ensure_topics(bootstrap, topics, PARTITIONS)
    pipe = Pipeline(topics[0], topics[-1])
    for k, (code, name) in enumerate(zip(codes, names, strict=True)):
        cmd = [sys.executable, str(PEERS_DIR / "plain_loop.py"), "--bootstrap", bootstrap]
        cmd += ["--redis", redis_url, "--prefix", tag, "--code", code]
        cmd += ["--group", f"{tag}-{name}", "--src", topics[k], "--dst", topics[k + 1]]
        pipe.procs.append(spawn(cmd, {"PYTHONPATH": _pythonpath(pythonpath)}))
    return pipe
