"""``elastic-sps up``: the broker, redis-server, Spark and every service as processes on
one machine, healthy before it returns, all stopped on exit (no orphans)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from elastic_sps.io import embedded
from elastic_sps.io.embedded import PrerequisiteError, free_port
from elastic_sps.services.ensemble.health_watch import HealthWatch, health_of
from elastic_sps.settings import (
    DEFAULT_POLICY,
    DEFAULT_PREDICTOR,
    DataplaneSettings,
    LocalSettings,
    ServiceSettings,
)

if TYPE_CHECKING:
    from elastic_sps.model.topology import Topology

SERVICES = ("ingress", "monitor", "analyze", "plan", "execute", "dataplane")
DEPLOYMENT_RECORD = "deployment.json"  # in the run folder: the deployment ``up`` goes on with
STANDBY = "dataplane-standby"  # a second dataplane process (LocalSettings.dataplane_standby)


log = logging.getLogger("sps.supervisor")

# Like compose's ``restart: unless-stopped``, with a limit: a service that crashes this
# often within the window is given up on (its log says why).
MAX_CRASHES, CRASH_WINDOW_S = 5, 60.0


class GaveUp(RuntimeError):
    """A service kept crashing; the message names it and its log."""


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    port: int | None
    log: Path
    crashes: list[float] = field(default_factory=list)
    restart_at: float | None = None

    def alive(self) -> bool:
        return self.proc.poll() is None


@dataclass
class Ensemble:
    bootstrap: str
    redis_url: str
    run_dir: Path
    env: dict[str, str]
    children: list[Child] = field(default_factory=list)
    restarts: dict[str, int] = field(default_factory=dict)
    failed: str | None = None
    stopping: threading.Event = field(default_factory=threading.Event)
    redis_server: embedded.RedisServer | None = None  # the embedded one, if any
    # A service swapped for the user's own program (``up --replace analyze='CMD'``): it
    # gets the same SPS_* environment and must serve /health on SPS_WEB_PORT.
    commands: dict[str, list[str]] = field(default_factory=dict)
    prometheus_url: str | None = None  # up --prometheus

    def urls(self) -> dict[str, str]:
        return {c.name: f"http://127.0.0.1:{c.port}/metrics" for c in self.children if c.port}

    def _spawn(self, name: str, port: int | None, log_path: Path) -> subprocess.Popen[bytes]:
        env = {**self.env, **({"SPS_WEB_PORT": str(port)} if port else {})}
        module = "dataplane" if name == STANDBY else name
        return subprocess.Popen(
            self.commands.get(name, [sys.executable, "-m", f"elastic_sps.services.{module}"]),
            env=env,
            stdout=log_path.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: a stop takes Spark's JVM along
        )

    def start(self, name: str) -> Child:
        port = free_port()
        log_path = self.run_dir / f"{name}.log"
        child = Child(name, self._spawn(name, port, log_path), port, log_path)
        self.children.append(child)
        return child

    def supervise_once(self, now: float | None = None) -> None:
        """Restart crashed services with exponential backoff (1, 2, 4 ... 15 s); give up
        on one that crashed MAX_CRASHES times within CRASH_WINDOW_S."""
        now = time.monotonic() if now is None else now
        for c in self.children:
            if c.alive() or self.stopping.is_set():
                continue
            if c.restart_at is None:
                c.crashes = [t for t in c.crashes if now - t < CRASH_WINDOW_S] + [now]
                if len(c.crashes) >= MAX_CRASHES:
                    self.failed = (
                        f"{c.name} crashed {len(c.crashes)} times within "
                        f"{CRASH_WINDOW_S:.0f} s; giving up (log: {c.log})"
                    )
                    raise GaveUp(self.failed)
                backoff = min(15.0, 2.0 ** (len(c.crashes) - 1))
                c.restart_at = now + backoff
                log.warning(
                    "%s exited with %s; restarting in %.0f s (log: %s)",
                    c.name,
                    c.proc.returncode,
                    backoff,
                    c.log,
                )
            elif now >= c.restart_at:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(c.proc.pid, signal.SIGKILL)  # leftovers of its group (JVM)
                c.proc = self._spawn(c.name, c.port, c.log)
                c.restart_at = None
                self.restarts[c.name] = self.restarts.get(c.name, 0) + 1

    def supervise(self) -> None:
        """The supervisor thread: runs until ``stop``; a give-up is left in ``failed``. A
        service running unhealthy is said in the log (``health_watch``; a dataplane
        standing by is healthy as such)."""
        watch = HealthWatch()
        while not self.stopping.wait(0.5):
            try:
                self.supervise_once()
            except GaveUp as exc:
                log.error("%s", exc)
                return
            watch.check(self.children, time.monotonic())

    def healthy(self, child: Child) -> bool:
        return child.port is not None and health_of(child.port)[0]

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

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGTERM every child at once, wait for them all against one deadline (not one
        per child: six slow exits in a row took minutes on a loaded machine), then
        SIGKILL the groups still there. Logs how long each took. The dataplane's driver
        alone is signalled: it ends its tasks' epochs before Spark's JVM stops
        (``dataplane/stopping.py``); every other child's whole group."""
        self.stopping.set()
        t0 = time.monotonic()
        for c in reversed(self.children):
            if c.alive():
                alone = c.name in ("dataplane", STANDBY) and c.name not in self.commands
                with contextlib.suppress(ProcessLookupError):
                    if alone:
                        c.proc.send_signal(signal.SIGTERM)
                    else:
                        os.killpg(c.proc.pid, signal.SIGTERM)
        deadline = t0 + grace_s
        for c in reversed(self.children):
            try:
                c.proc.wait(max(0.1, deadline - time.monotonic()))
                log.info("%s stopped after %.1f s", c.name, time.monotonic() - t0)
            except subprocess.TimeoutExpired:
                log.warning("%s still running %.0f s after SIGTERM: killing", c.name, grace_s)
            # its group too: Spark's JVM and workers outlive a driver that exited
            with contextlib.suppress(ProcessLookupError):
                os.killpg(c.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                c.proc.wait(10)


def check_prerequisites() -> None:
    if shutil.which("java") is None:
        raise PrerequisiteError(
            "Java is missing (Spark needs it): apt-get install "
            "openjdk-17-jre-headless, or run `make install`"
        )
    if not LocalSettings().external_redis and shutil.which("redis-server") is None:
        raise PrerequisiteError(
            "redis-server is missing: apt-get install redis-server, or set "
            "SPS_EXTERNAL_REDIS to a running server"
        )


@contextlib.contextmanager
def up(
    topology: str,
    run_dir: Path,
    policy: str = DEFAULT_POLICY,
    predictor: str = DEFAULT_PREDICTOR,
    tau_ms: float | None = None,
    td: float = 1.0,
    extra_env: dict[str, str] | None = None,
    replace: dict[str, list[str]] | None = None,
    with_prometheus: bool = False,
    events_file: str | Path | None = None,
    fresh: bool = False,
) -> Iterator[Ensemble]:
    """Start everything; stop everything on exit, whatever happened. ``replace`` runs
    the given command instead of a built-in service (the same environment, supervised).
    The run folder's last deployment of the same pipeline goes on (``deployment_prefix``)
    unless ``fresh``."""
    from elastic_sps.model import topology as topology_mod
    from elastic_sps.settings import ServiceSettings

    check_prerequisites()
    run_dir.mkdir(parents=True, exist_ok=True)
    topology = measured_topology(topology, run_dir, events_file)
    topo = topology_mod.load(topology)
    unknown = set(replace or {}) - set(SERVICES)
    if unknown:
        raise ValueError(f"cannot replace {sorted(unknown)}: services are {SERVICES}")
    with contextlib.ExitStack() as stack:
        bootstrap, server = _servers(stack, run_dir)
        redis_url = LocalSettings().external_redis or server.url  # type: ignore[union-attr]
        prefix, resumed = deployment_prefix(run_dir, topo.name, fresh)
        log.info(
            "%s deployment %s (%s)",
            "resuming" if resumed else "starting",
            prefix,
            "its state and read positions go on; up --fresh starts a new one"
            if resumed
            else "reads the source from its start",
        )
        env = {
            **os.environ,
            "SPS_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "SPS_REDIS_URL": redis_url,
            "SPS_KEY_PREFIX": prefix,
            "SPS_TOPOLOGY": topology,
            "SPS_TD": str(td),
            "SPS_POLICY": policy,
            "SPS_PREDICTOR": predictor,
            "SPS_CHECKPOINT_DIR": str(run_dir / "checkpoints"),
            "SPS_STATE_DIR": str(run_dir / "state"),
            # Tansu's ListOffsets is wrong for multi-record batches: its producers' registry
            **({"SPS_PARTITION_ENDS": "registry"} if embedded.broker_kind() == "tansu" else {}),
            # wait-bound operators: capacity follows replicas on any laptop (README)
            "SPS_COST_MODE": DataplaneSettings().ensemble_cost_mode(),
            # with a standby, a dataplane restarted after a fault boots after the new
            # holder's first batch (``Lease.wait_until_holder_serves``)
            **({"SPS_STANDBY_BOOT_WAIT_S": "60"} if LocalSettings().dataplane_standby else {}),
            **(extra_env or {}),
            **({"SPS_TAU_MS": str(tau_ms)} if tau_ms is not None else {}),
        }
        admission = env["SPS_ADMISSION"] = _admission(env, topo, bootstrap, replace or {})
        _create_topics(bootstrap, topo, prefix, admission)
        ens = Ensemble(
            bootstrap, redis_url, run_dir, env, redis_server=server, commands=dict(replace or {})
        )
        stack.callback(ens.stop)
        from elastic_sps.services.ensemble.decisions import DecisionLog

        decisions = ServiceSettings().topics.decisions
        decision_log = DecisionLog(bootstrap, decisions, run_dir / "decisions.jsonl")
        stack.callback(decision_log.close)
        built_in = _start_services(ens, admission, replace or {})
        healthy_at = time.monotonic()
        if LocalSettings().dataplane_standby and "dataplane" not in (replace or {}):
            ens.start(STANDBY)  # after the first holds the lease: it stands by, warming up
        if with_prometheus:
            from elastic_sps.services.ensemble.prometheus import prometheus

            ports = {c.name: c.port for c in ens.children if c.port}
            ens.prometheus_url = stack.enter_context(prometheus(run_dir, ports))
        from elastic_sps.services.ensemble import joins

        groups = joins.ensemble_groups(ServiceSettings().topics, topo, prefix, admission, built_in)
        joins.settle(bootstrap, groups, blind=bool(replace), since=healthy_at)
        threading.Thread(target=ens.supervise, name="supervisor", daemon=True).start()
        with _stop_on_signals():
            yield ens


def _start_services(ens: Ensemble, admission: str, replace: dict[str, list[str]]) -> list[str]:
    """Every service (with admission at the entry step no ingress: the entry operator's
    replicas admit) until all are healthy; the built-in ones' names."""
    started = [n for n in SERVICES if n in replace or (n, admission) != ("ingress", "entry")]
    for name in started:
        ens.start(name)
    ens.wait_healthy()
    return [n for n in started if n not in replace]


def deployment_prefix(run_dir: Path, pipeline: str, fresh: bool = False) -> tuple[str, bool]:
    """The deployment's key prefix, and whether it is resumed: the run folder's last one
    if it ran the pipeline of this name (its state, progress and read positions, kept by
    the folder's servers or your own, go on, as a restarted service's do), else a new
    one, ``run<milliseconds>``, recorded in ``deployment.json``."""
    record = run_dir / DEPLOYMENT_RECORD
    doc = json.loads(record.read_text()) if record.exists() else {}
    if not fresh and doc.get("pipeline") == pipeline and doc.get("prefix"):
        return str(doc["prefix"]), True
    ms = time.time_ns() // 1_000_000
    prefix = f"run{ms}" if doc.get("prefix") != f"run{ms}" else f"run{ms + 1}"
    record.write_text(json.dumps({"prefix": prefix, "pipeline": pipeline}) + "\n")
    return prefix, False


def _servers(stack: contextlib.ExitStack, run_dir: Path) -> tuple[str, embedded.RedisServer | None]:
    """The broker and redis-server: the user's (``SPS_EXTERNAL_KAFKA``,
    ``SPS_EXTERNAL_REDIS``) or embedded ones, whose data live in the run folder as compose's
    volumes do: a redis-server restart keeps the knowledge base, the end registry and
    the id ledger (append-only)."""
    local = LocalSettings()
    bootstrap = local.external_kafka or stack.enter_context(
        embedded.kafka_broker(data_dir=run_dir / "kafka")
    )
    if local.external_redis:
        return bootstrap, None
    (run_dir / "redis").mkdir(exist_ok=True)
    return bootstrap, stack.enter_context(embedded.redis_handle(data_dir=str(run_dir / "redis")))


def _admission(
    env: dict[str, str], topo: Topology, bootstrap: str, replace: dict[str, list[str]]
) -> str:
    """Where the ensemble's services admit events (``SPS_ADMISSION``, checked; ``auto``
    resolved once, ``las.site``), handed to every service so that all agree. A swapped-in
    ingress is the one that admits under ``auto``: two doors would admit each event twice."""
    from elastic_sps.las.site import resolve

    if "ingress" in replace and env.get("SPS_ADMISSION", "auto") == "auto":
        return "ingress"
    checked = ServiceSettings.model_validate(
        {
            k: env[f"SPS_{k.upper()}"]
            for k in ("admission", "task_window_s", "fixed_replicas")
            if f"SPS_{k.upper()}" in env
        }
    )
    settings = ServiceSettings().model_copy(
        update={
            "kafka_bootstrap_servers": bootstrap,
            "redis_url": env["SPS_REDIS_URL"],
            "key_prefix": env["SPS_KEY_PREFIX"],
            "admission": checked.admission,
            "task_window_s": checked.task_window_s,
            "fixed_replicas": checked.fixed_replicas,
        }
    )
    return resolve(settings, topo)


def _create_topics(bootstrap: str, topo: Topology, prefix: str, admission: str) -> None:
    """The control topics, one topic per operator with a partition per replica slot, and
    the user's topics: the source (if it does not exist yet) and the outputs. With
    admission at the entry step the source gets a partition per entry replica (its
    replicas own the source's partitions)."""
    from elastic_sps.io.kafka_admin import ensure_topics
    from elastic_sps.io.knowledge_base import Keys
    from elastic_sps.settings import ServiceSettings

    topics = ServiceSettings().topics
    if admission == "entry":
        source = topo.source.topic(str(topics.ingress))
        pool = topo[topo.entry_operators[0]].max_replicas
        ensure_topics(bootstrap, [source], partitions=pool)
    ensure_topics(bootstrap, topics.control())
    for op in topo.operators:
        ensure_topics(bootstrap, [Keys(prefix).topic(op.name)], partitions=op.max_replicas)
    ensure_topics(bootstrap, [*topo.source.topics, *{o.output for o in topo.operators if o.output}])


def measured_topology(topology: str, run_dir: Path, events_file: str | Path | None) -> str:
    """The topology every service runs: as given when each operator declares its et_ms;
    otherwise measured on the sample events (``events_file``, else the topology's own)
    and written to ``<run_dir>/topology.yaml``, so all services plan on one measurement."""
    import yaml

    from elastic_sps.model import topology as topology_mod
    from elastic_sps.pipeline import costs
    from elastic_sps.pipeline.samples import sample_payloads

    topo = topology_mod.load(topology)
    if topo.measured:
        return topology
    samples = sample_payloads(topo, events_file)
    if samples is None:
        raise PrerequisiteError(
            f"{topology}: operators without et_ms need sample events to measure them on "
            "(--events FILE, or source.sample_events in the topology)"
        )
    measured = costs.measure(topo, samples)
    for c in measured.values():
        log.info("measured %s: et %.3f ms, CPU share %.2f", c.operator, c.et_ms, c.cpu_share)
    doc = topo.with_costs(costs.as_costs(measured)).to_dict()
    if topo.source.sample_events:  # keep the samples reachable from the new file's folder
        doc["source"]["sample_events"] = str(topo.relative(topo.source.sample_events).resolve())
    out = run_dir / "topology.yaml"
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(out)


class Stopped(SystemExit):
    """SIGTERM or SIGHUP: unwind like Ctrl-C so every child and server is stopped."""


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP (a closed terminal) unwind the ``with`` like SIGINT does, so
    the ExitStack stops every child, the Spark JVM and the embedded servers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_stopped(signum: int, frame: object) -> None:
        raise Stopped(128 + signum)

    old = {s: signal.signal(s, raise_stopped) for s in (signal.SIGTERM, signal.SIGHUP)}
    # Ctrl-C too, explicitly: a process started in the background by a non-interactive
    # shell inherits SIGINT ignored, and Python then leaves it ignored (up never stopped).
    old[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
