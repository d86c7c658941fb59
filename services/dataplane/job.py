"""The Spark application: one streaming query serving every operator of the topology,
run by the process that holds the dataplane lease (``lease.py``)."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from redis.exceptions import RedisError

from elastic_sps.io.kafka_admin import ensure_topics
from elastic_sps.io.knowledge_base import Keys, KnowledgeBase
from elastic_sps.las.site import entry_pool, source_topic
from elastic_sps.las.site import resolve as resolve_admission
from elastic_sps.logs import configure_logging
from elastic_sps.model import topology as topology_mod
from elastic_sps.services.dataplane import daemon
from elastic_sps.services.dataplane.admission import check_entry_step
from elastic_sps.services.dataplane.cluster import (
    check_executors,
    forwarded_env,
    is_cluster,
    ship_project,
)
from elastic_sps.services.dataplane.observe import Observed
from elastic_sps.services.dataplane.options import CostMode, SourceOptions
from elastic_sps.services.dataplane.slots import tasks_per_operator
from elastic_sps.services.dataplane.stopping import StopRequest, end_epochs
from elastic_sps.services.ops_server import serve
from elastic_sps.settings import DataplaneSettings

log = logging.getLogger("sps.dataplane")


def cost_mode(settings: DataplaneSettings) -> CostMode:
    return settings.cost_mode


def tasks_for(settings: DataplaneSettings, op: Any) -> int:
    return tasks_per_operator(op.cpu_bound, settings.tasks_per_query, settings.cores_or_local())


def spark_master(settings: DataplaneSettings, topo: Any) -> str:
    """``auto``: one task slot per task a micro-batch of each query plans, each task
    retried up to ``task_max_failures`` times (Spark's ``local[N,F]``)."""
    if settings.spark_master != "auto":
        return settings.spark_master
    slots = sum(tasks_for(settings, op) for op in topo.operators)
    return f"local[{slots},{settings.task_max_failures}]"


def session_conf(settings: DataplaneSettings, master: str) -> dict[str, str]:
    conf = {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.python.worker.reuse": "true",
        "spark.sql.streaming.noDataMicroBatches.enabled": "true",
        "spark.driver.memory": "1g",
        "spark.task.maxFailures": str(settings.task_max_failures),
        "spark.driver.bindAddress": os.environ.get("SPARK_LOCAL_IP", "0.0.0.0"),
    }
    if settings.spark_jvm_options:
        for role in ("driver", "executor"):
            conf[f"spark.{role}.extraJavaOptions"] = settings.spark_jvm_options
    if is_cluster(master):
        conf.update(forwarded_env())
        if settings.executor_python:
            conf["spark.pyspark.python"] = settings.executor_python
    else:  # the workers fork from a daemon that has imported the replicas' modules
        conf["spark.python.daemon.module"] = daemon.MODULE
    conf.update(settings.spark_conf)  # the user's word last (k8s image, executor sizes, …)
    return conf


def spark_session(settings: DataplaneSettings, master: str, topo: Any) -> Any:
    from pyspark.sql import SparkSession

    # The workers must run this interpreter (the venv with pyarrow and the project); on a
    # cluster built from the project's image the path is the same on every node.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Local modes (local-cluster too) talk to this machine only: keep Spark off the others.
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName("elastic-sps-dataplane").master(master)
    for key, value in session_conf(settings, master).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if is_cluster(master):
        codes = [op.code for op in topo.declared.operators if op.code]
        ship_project(spark, [code.partition(":")[0] for code in codes])
        check_executors(spark, max(2, spark.sparkContext.defaultParallelism))
    return spark


def create_topics(settings: DataplaneSettings, topo: Any) -> None:
    """One partition per replica slot of each operator's pool; the output topics; with
    admission at the entry step, the source topic if it does not exist yet, with one
    partition per entry replica (an existing one keeps its partitions)."""
    if settings.admission == "entry":
        entry = topo[topo.entry_operators[0]]
        ensure_topics(
            settings.kafka_bootstrap_servers,
            [source_topic(settings, topo)],
            partitions=entry.max_replicas,
        )
    for op in topo.operators:
        ensure_topics(
            settings.kafka_bootstrap_servers,
            [Keys(settings.key_prefix).topic(op.name)],
            partitions=op.max_replicas,
        )
    ensure_topics(settings.kafka_bootstrap_servers, settings.topics.control())
    outputs = sorted({op.output for op in topo.operators if op.output})
    if outputs:
        ensure_topics(settings.kafka_bootstrap_servers, outputs)


def prepare_topology(settings: DataplaneSettings) -> Any:
    """The topology with every operator's code checked (imported, opened, closed: a
    module that does not import or an ``open`` that fails stops the dataplane here, with
    one message naming the operator) and its costs: as declared, else measured on the
    sample events and published for the other services (``elastic_sps.pipeline.costs``)."""
    from elastic_sps.io.redis_client import redis_client
    from elastic_sps.pipeline import costs
    from elastic_sps.pipeline.chain import open_runnable
    from elastic_sps.pipeline.operators import Context
    from elastic_sps.pipeline.samples import sample_payloads

    topo = topology_mod.load(settings.topology)
    r = redis_client(settings.redis_url)
    prefix = Keys(settings.key_prefix).prefix
    if topo.measured:
        for op in topo.operators:
            open_runnable(topo, op.name, Context(op.name, r, prefix)).close()
        return topo
    samples = sample_payloads(topo, settings.sample_events)
    if samples is None:
        raise SystemExit(
            f"dataplane: {topo.name}: operators without et_ms need sample events to be "
            "measured on (SPS_SAMPLE_EVENTS, or source.sample_events in the topology)"
        )
    measured = costs.measure(topo, samples, r, prefix)
    for c in measured.values():
        log.info("measured %s: et %.3f ms, CPU share %.2f", c.operator, c.et_ms, c.cpu_share)
    costs.publish(r, prefix, measured)
    return topo.with_costs(costs.as_costs(measured))


def check_durability(settings: DataplaneSettings, topo: Any) -> None:
    """Keyed operators' state is only as durable as Redis: said at start, or refused
    (``SPS_REQUIRE_DURABLE_STATE``) with ``NotDurableError``."""
    from elastic_sps.io.durability import check_keyed_state
    from elastic_sps.io.redis_client import redis_client

    stateful = [op.name for op in topo.operators if op.stateful]
    if stateful:
        r = redis_client(settings.redis_url)
        check_keyed_state(r, stateful, settings.require_durable_state)


def entry_source(settings: DataplaneSettings, topo: Any) -> tuple[str, int]:
    """With admission at the entry step: the source topic the entry operator reads and its
    partition count (``check_entry_step`` said it may)."""
    from elastic_sps.io.kafka_admin import partition_count

    topic = source_topic(settings, topo)
    partitions = partition_count(settings.kafka_bootstrap_servers, topic)
    if not partitions:
        raise SystemExit(f"dataplane: the source topic {topic!r} is not readable")
    entry, pool = topo[topo.entry_operators[0]], entry_pool(settings, topo)
    if partitions < pool:  # the plan would count replicas with nothing to read
        raise SystemExit(
            f"dataplane: admission: entry: {entry.name}'s replicas own {topic!r}'s "
            f"partitions, {partitions} of them for a pool of {pool}: give the "
            f"topic at least {pool} partitions, lower max_replicas, or use admission: ingress"
        )
    return topic, partitions


def source_frame(
    spark: Any, settings: DataplaneSettings, topo: Any, ops: list[str], holder: str = ""
) -> Any:
    """The source of the query serving ``ops``, resolved (Spark asks a Python process
    for its schema): done before a standby waits, its takeover only starts the query.
    ``holder``: this process's lease id, which its serving tasks record."""
    from elastic_sps.services.dataplane.source import SpsKafkaSource

    spark.dataSource.register(SpsKafkaSource)
    entry = entry_source(settings, topo) if settings.admission == "entry" else None
    options = SourceOptions.build(settings, topo, ops, cost_mode(settings), entry, holder)
    return spark.readStream.format("sps_kafka").options(**options.to_spark()).load()


def checkpoint_path(settings: DataplaneSettings, label: str) -> Path:
    """A query's Spark checkpoint, per deployment: a new key prefix in a folder another
    used would otherwise take that deployment's offsets for its own (and skip, or refuse,
    what its Redis never saw). The default prefix's stays where it always was."""
    base = Path(settings.checkpoint_dir)
    default = type(settings).model_fields["key_prefix"].default
    return base / label if settings.key_prefix == default else base / settings.key_prefix / label


def start_query(
    spark: Any,
    settings: DataplaneSettings,
    topo: Any,
    ops: list[str],
    frame: Any = None,
    holder: str = "",
) -> Any:
    """The streaming query serving ``ops`` (on ``frame``, its ``source_frame`` if already
    resolved, else one for ``holder``); restarted, it resumes from its checkpoint."""
    label = "ops" if len(ops) > 1 else ops[0]
    if settings.admission == "entry":  # its offsets are the source's (``las.moves``)
        label += "@entry"
    df = frame if frame is not None else source_frame(spark, settings, topo, ops, holder)
    return (
        df.writeStream.format("noop")
        .queryName(f"op_{label}")
        .option("checkpointLocation", str(checkpoint_path(settings, label)))
        # walCommit + commitOffsets were ~300 of a 457 ms cycle with 4 queries
        # (measured, 2 cores): write the offset log off the batch's critical path.
        .option("asyncProgressTrackingEnabled", str(settings.async_progress).lower())
        .trigger(processingTime=f"{int(settings.trigger_ms)} milliseconds")
        .start()
    )


def start_queries(
    spark: Any, settings: DataplaneSettings, topo: Any, frame: Any = None
) -> list[Any]:
    from elastic_sps.io.redis_client import redis_client

    queries = [start_query(spark, settings, topo, list(topo.names), frame)]
    kb = KnowledgeBase(redis_client(settings.redis_url), settings.key_prefix)
    kb.record_run({q.name: q.runId for q in queries})
    return queries


# Spark waits a hard-coded 10 s for the Python worker that plans a Python data source's
# batch to connect back; a loaded 2-core machine starting three JVMs can miss it. The
# query is restarted from its checkpoint (nothing is lost or read twice); anything else
# fails the dataplane, which its supervisor restarts.
TRANSIENT_QUERY_ERRORS = ("Python worker failed to connect back",)
MAX_QUERY_RESTARTS = 3
PROGRESS_LOG_S = 20.0  # how often the log says where a micro-batch's time went


def batch_phases(progress: list[dict]) -> dict[str, float]:
    """Mean milliseconds per phase (Spark's ``durationMs``) over the batches given, plus
    ``between``: the mean gap from one batch's end to the next one's start, the time in
    which no task serves a replica."""
    phases: dict[str, list[float]] = {}
    for p in progress:
        for phase, ms in (p.get("durationMs") or {}).items():
            phases.setdefault(phase, []).append(float(ms))
    out = {k: sum(v) / len(v) for k, v in phases.items()}
    total = sum(phases.get("triggerExecution", []))
    if len(progress) > 1 and total:
        first, last = _epoch_s(progress[0]["timestamp"]), _epoch_s(progress[-1]["timestamp"])
        last_ms = float(progress[-1]["durationMs"].get("triggerExecution", 0))
        span_ms = 1000 * (last - first) + last_ms
        out["between"] = max(0.0, span_ms - total) / (len(progress) - 1)
    return out


def _epoch_s(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def log_phases(queries: list[Any], seen: dict[str, int]) -> None:
    """One INFO line per query: the phases of its batches since the last line
    (``batch_phases``); ``seen`` holds the last batch id logged per query."""
    for q in queries:
        recent = [
            p
            for p in q.recentProgress
            if p.get("durationMs") and p.get("batchId", -1) > seen.get(q.name, -1)
        ]
        if len(recent) < 2:
            continue
        seen[q.name] = recent[-1]["batchId"]
        phases = batch_phases(recent)
        log.info(
            "query %s, last %d batches, mean ms: %s",
            q.name,
            len(recent),
            ", ".join(f"{k} {v:.0f}" for k, v in sorted(phases.items())),
        )


def watch(
    spark: Any,
    settings: DataplaneSettings,
    topo: Any,
    queries: list[Any],
    on_serving: Callable[[], bool] = lambda: True,
    holder: str = "",
    stopped: Callable[[], bool] = lambda: False,
) -> None:
    """Until a query stops, or ``stopped`` says so: restart a query that failed transiently,
    raise on anything else (a user's operator that fails too often is named:
    ``OperatorFailing``). ``on_serving``: when every query has finished a batch, until
    it returns True; ``holder``: the lease id a restarted query's tasks record."""
    restarts = 0
    logged_at, logged_batch = time.monotonic(), dict[str, int]()
    serving = False
    while not stopped():
        time.sleep(0.5)
        if not serving and all(q.lastProgress is not None for q in queries):
            serving = on_serving()
        if time.monotonic() - logged_at > PROGRESS_LOG_S:
            log_phases(queries, logged_batch)
            logged_at = time.monotonic()
        for k, q in enumerate(queries):
            if q.isActive:
                continue
            exc = q.exception()
            if exc is None:
                return  # stopped on purpose
            if any(t in str(exc) for t in TRANSIENT_QUERY_ERRORS) and restarts < MAX_QUERY_RESTARTS:
                restarts += 1
                log.warning(
                    "query %s failed (%s); restarting it from its checkpoint",
                    q.name,
                    str(exc).splitlines()[0],
                )
                queries[k] = start_query(spark, settings, topo, list(topo.names), holder=holder)
                continue
            raise RuntimeError(f"query {q.name} failed: {operator_failure(str(exc))}")


def operator_failure(message: str) -> str:
    """A failed query's message, led by a user operator's ``OperatorFailing`` line when
    that is why (Spark buries it in a Python traceback inside a Java one)."""
    for line in message.splitlines():
        if "OperatorFailing:" in line:
            return line.split("OperatorFailing:", 1)[1].strip() + "\n" + message
    return message


def serve_observability(settings: DataplaneSettings, lease: Any) -> Observed:
    """/metrics and /health, served from the process's start (``Observed``)."""
    from elastic_sps.io.embedded import free_port
    from elastic_sps.io.redis_client import redis_client

    r = redis_client(settings.redis_url)
    observed = Observed(r, Keys(settings.key_prefix), lease, settings.task_window_s)
    port = settings.web_port or free_port()
    serve("dataplane", settings.web_host, port, observed.registry, observed.state)
    return observed


def run(settings: DataplaneSettings, stop: StopRequest | None = None) -> None:
    """The dataplane until its queries stop, fail, or ``stop`` is requested (SIGTERM:
    ``stopping.py``), which ends them gracefully."""
    from elastic_sps.io.durability import NotDurableError
    from elastic_sps.io.redis_client import redis_client
    from elastic_sps.pipeline.operators import OperatorLoadError
    from elastic_sps.services.dataplane.lease import Lease

    configure_logging("dataplane")
    keys = Keys(settings.key_prefix)
    r = redis_client(settings.redis_url)
    lease = Lease(r, keys.dataplane_lease, settings.lease_s)
    observed = serve_observability(settings, lease)
    waited = lease.wait_until_holder_serves(keys.dataplane_serving, settings.standby_boot_wait_s)
    observed.phase = "starting"
    if waited >= 1:
        log.info("another process holds the lease: started after its first batch (%.1f s)", waited)
    try:
        topo = prepare_topology(settings)
        check_durability(settings, topo)
        settings = settings.model_copy(update={"admission": resolve_admission(settings, topo)})
        if settings.admission == "entry":
            check_entry_step(topo, settings.task_window_s)
    except (OperatorLoadError, NotDurableError, ValueError, RedisError, KafkaException) as exc:
        log.error("%s", exc)
        raise SystemExit(f"dataplane: {exc}") from None
    create_topics(settings, topo)
    spark = spark_session(settings, spark_master(settings, topo), topo)
    spark.sparkContext.setLogLevel("WARN")
    queries: list[Any] = []
    observed.running(topo, lambda: queries)
    frame = source_frame(spark, settings, topo, list(topo.names), lease.me)
    serve_queries(spark, settings, topo, frame, lease, stop or StopRequest(), queries)


def serve_queries(
    spark: Any,
    settings: DataplaneSettings,
    topo: Any,
    frame: Any,
    lease: Any,
    stop: StopRequest,
    queries: list[Any],
) -> None:
    """Take the lease (a standby waits here, warm, until the holder's lapses), run the
    queries on ``frame`` until they stop, fail or ``stop`` is requested (then gracefully:
    ``stopping.py``), and release the lease and Spark whatever happened."""
    from elastic_sps.services.dataplane.lease import lost

    keys = Keys(settings.key_prefix)
    try:
        lease.acquire()
        lease.keep(lost)
        stop.graceful = True  # from here a SIGTERM lets the first batch end and commit too
        began = time.monotonic()
        queries.extend(start_queries(spark, settings, topo, frame))
        log.info(
            "%d queries running for %s (started in %.1f s)",
            len(queries),
            topo.name,
            time.monotonic() - began,
        )
        announce = lambda: lease.serving(keys.dataplane_serving)  # noqa: E731
        watch(spark, settings, topo, queries, announce, lease.me, lambda: stop.requested)
        if stop.requested:
            overlaps = settings.epoch_overlap_s > 0
            grace = settings.stop_grace_s
            end_epochs(lease.redis, keys, lease.me, queries, grace, overlaps=overlaps)
    finally:
        for q in queries:
            q.stop()
        lease.release()
        spark.stop()
