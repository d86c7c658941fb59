"""Typed settings per service, from environment variables prefixed ``SPS_``.

A bad value stops the service at start with a message naming the variable
(``settings_or_exit``).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Literal, NoReturn, TypeVar

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from elastic_sps.control.stabilise import (
    DEFAULT_STABILISER,
    PRESETS,
    RULE_HELP,
    Stabilisation,
    build_rules,
)
from elastic_sps.io.local_settings import LocalSettings, described
from elastic_sps.io.topics import Topics
from elastic_sps.model.windows import IDLE_S
from elastic_sps.pipeline.failures import FAILURE_WINDOW, MAX_FAILURE_SHARE

_f = described
__all__ = ["LocalSettings"]  # what every process reads, declared beside the clients

# What the services run when a user sets nothing (SPS_POLICY, SPS_PREDICTOR): the Basic
# forecast sized at 70 % utilisation, with the calm stabiliser (elastic_sps.control.stabilise)
# on top.
# Chosen on benchmarks/bench_control.py's dominance group (docs/2026-11-24-control.md):
# it saves more than DS2 and AUTOSCALE on every trace of the set at a mean latency within
# a few ms of DS2's on most. The library's
# own default (``make_policy("pa-sps")``) stays the paper's LR.
DEFAULT_POLICY = "pa-sps"
DEFAULT_PREDICTOR = "basic@0.7"

CostMode = Literal["none", "wait", "cpu"]


class ServiceSettings(BaseSettings):
    """Every service's: where the broker, Redis and the topology are, and the interval."""

    model_config = SettingsConfigDict(env_prefix="SPS_", extra="ignore", env_nested_delimiter="__")

    kafka_bootstrap_servers: str = _f("127.0.0.1:9092", "Kafka bootstrap servers.")
    redis_url: str = _f("redis://127.0.0.1:6379/0", "The knowledge base (redis://, rediss://).")
    key_prefix: str = _f("sps", "Namespaces one run's Redis keys and operator topics.")
    topology: str = _f("twitter", "A bundled topology's name or a YAML file's path.")
    td: float = _f(1.0, "The MAPE interval, seconds.", gt=0)
    web_port: int = _f(
        0, "The service's /metrics and /health port (0: a free one).", ge=0, le=65535
    )
    web_host: str = _f("127.0.0.1", "The address that port listens on (0.0.0.0 in compose).")
    state_dir: str | None = _f(
        None,
        "Where a faust service keeps its data folder (default: a new temporary folder; "
        "`up` and `demo`: <run folder>/state), not the working directory.",
    )
    kafka_session_timeout_s: float = _f(
        6.0, "Consumer group session timeout: how soon a dead consumer's partitions move.", gt=0
    )
    # faust fixes 1,500 ms, and the embedded broker answers only when it runs out
    kafka_fetch_max_wait_ms: int = _f(
        50, "The longest a faust service's fetch waits for records.", ge=1, le=30_000
    )
    topics: Topics = Field(
        default_factory=Topics,
        description="Topic names, one variable each (SPS_TOPICS__METRICS=...).",
    )
    track_ids: bool = _f(
        False,
        "Record every event id at every stage (the report's `lost` by id); costs Redis "
        "memory per event: for runs, tests and audits.",
    )
    dry_run: bool = _f(
        False,
        "Run the whole loop and record every decision, but change no replica count.",
    )
    # Here, not in DataplaneSettings: the ingress's admission bound reads the checkpoint.
    task_window_s: float = _f(
        30.0,
        "A dataplane task's epoch: how long it keeps serving its replicas' partitions, "
        "reading what upstream produces meanwhile (0: its planned offsets only); it ends "
        "sooner when a keyed operator spread over several tasks, or CPU-bound, changes its "
        "replica count, or when a replica fails. Events arriving while one epoch ends and "
        "the next starts wait for it.",
        ge=0,
    )
    checkpoint_s: float = _f(
        1.0,
        "Inside an epoch, how often each replica commits its progress, keyed state and "
        "counters (0: at the epoch's end only); the ingress's admission bound counts one "
        "checkpoint interval of batching on the path.",
        ge=0,
    )
    idle_s: float = _f(
        IDLE_S,
        "A source partition read to its end stays there this long before its reader "
        "declares it idle, so it no longer holds windows open (a reader behind never is).",
        gt=0,
    )
    latency_goal_ms: float | None = _f(
        None,
        "The one latency goal (analyze, plan, ingress): each operator gets at least the "
        "replicas that clear its backlog within it, LAS sheds only when even the pools "
        "cannot (LAS's τ unless tau_ms is set), pa-sps:bandit's reward is normalised "
        "against it.",
        gt=0,
    )
    admission: Literal["auto", "ingress", "entry"] = _f(
        "auto",
        "Where LAS admits the source's events: entry (the entry operator's replicas read "
        "the source themselves and admit as their first step: one read and one Kafka hop "
        "less per event; one stateless entry operator reading one source topic with a "
        "partition per replica of its largest pool), ingress (a service that reads the "
        "source and produces what it admits into the entry operator's topic), or auto: "
        "entry wherever the pipeline allows it, else ingress, logged with the reason.",
    )
    fixed_replicas: int | None = _f(
        None,
        "Ignore the plan and run this many replicas (a benchmark baseline; the entry "
        "step's pool then).",
        ge=1,
    )
    cores: int | None = _f(
        None,
        "Cores CPU-bound replicas run on: a Spark task each up to this many, and the plan "
        "never counts on more (default: this machine's; on a cluster, executors x cores).",
        ge=1,
    )

    def cores_or_local(self) -> int:
        import os

        return self.cores or os.cpu_count() or 1

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, v: str) -> str:
        if not v.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix://")
        return v


class MonitorSettings(ServiceSettings):
    # Late source counts are folded into the next interval and shift λ_G by one, so this
    # exceeds the ingress's own wait for a lagging read (1.5 s); it costs plan latency only
    # when the count is late.
    close_grace_s: float = _f(
        2.0, "How long after an interval's end the monitor waits for the ingress's count.", ge=0
    )


class AnalyzeSettings(ServiceSettings):
    policy: str = _f(
        DEFAULT_POLICY,
        "pa-sps, presps, ds2, autoscale, stela, lag[:ms], reactive, static:N, default; "
        "ds2@U, autoscale@U, reactive@U: at utilisation target U.",
    )
    predictor: str = _f(
        DEFAULT_PREDICTOR,
        "pa-sps's forecast: basic, lr, fft, ann, rf, auto (the recently most accurate), "
        "bandit (UCB); PREDICTOR@U sizes replicas at utilisation U.",
    )


class PlanSettings(ServiceSettings):
    budget: int | None = _f(None, "Most replicas in all (Stela's budget; none: the pools).", ge=0)
    stabiliser: str = _f(
        DEFAULT_STABILISER,
        f"Stabiliser preset ({', '.join(PRESETS)}); the single rules below go over it.",
    )
    scale_down_window_s: float | None = _f(None, RULE_HELP["scale_down_window_s"], ge=0)
    max_step: int | None = _f(None, RULE_HELP["max_step"], ge=1)
    scale_down_margin: float | None = _f(None, RULE_HELP["scale_down_margin"], ge=0)
    hold_on_backlog: bool | None = _f(None, RULE_HELP["hold_on_backlog"])
    scale_up_tolerance: float | None = _f(None, RULE_HELP["scale_up_tolerance"], ge=0)
    scale_up_tolerance_ratio: float | None = _f(None, RULE_HELP["scale_up_tolerance_ratio"], ge=0)
    scale_down_tolerance_ratio: float | None = _f(
        None, RULE_HELP["scale_down_tolerance_ratio"], ge=0, lt=1
    )
    follow_falling_need: bool | None = _f(None, RULE_HELP["follow_falling_need"])

    @field_validator("stabiliser")
    @classmethod
    def _known_preset(cls, v: str) -> str:
        if v not in PRESETS:
            raise ValueError(f"unknown stabiliser {v!r}; choose from {', '.join(PRESETS)}")
        return v

    def stabilisation(self) -> Stabilisation:
        """The preset with the rules set here over it."""
        rules = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(Stabilisation)
            if f.name not in ("scale_down_window_intervals", "scale_down_window_s")
        }
        return build_rules(PRESETS[self.stabiliser], self.td, self.scale_down_window_s, **rules)


class ExecuteSettings(ServiceSettings):
    redis_retry_max_s: float = _f(
        5.0, "Longest back-off between retries of a Redis write that failed.", gt=0
    )
    stela_machine_slots: int | None = _f(
        None, "On-demand scale-in by whole machines of this many slots (Stela).", ge=1
    )


class AdmissionSettings(ServiceSettings):
    """What LAS admission reads, wherever it runs: the ingress service, or the entry
    operator's replicas (``admission``: entry)."""

    tau_ms: float | None = _f(
        None, "LAS's queuing-latency goal τ (none: the latency goal, or admit all).", gt=0
    )
    las_horizon_s: float = _f(30.0, "LAS's average latency goal spans about this long.", gt=0)
    key_field: str = _f(
        "key",
        "JSON path of the LAS key when the topology's source.key does not say (empty: none).",
    )
    write_shed: bool = _f(False, "Also write shed events to the shed topic.")
    arrival_grace_s: float = _f(
        0.15,
        "How long after t's end a record stamped in t may still reach the broker.",
        ge=0,
    )


class IngressSettings(AdmissionSettings):
    batch: int = _f(5000, "Most records one ingress read takes.", ge=1)
    # interval t's count leaves only after a read begun past t's end came back
    poll_timeout_s: float = _f(
        0.05, "How long one read waits for a record when none is waiting.", gt=0
    )
    commit_interval_s: float = _f(
        1.0,
        "Least time between two commits of the input offsets (only ever of delivered "
        "records; a crash re-reads at most this much input; 0: after every read).",
        ge=0,
    )


class DataplaneSettings(AdmissionSettings):
    lease_s: float = _f(
        3.0,
        "A dataplane process runs the queries while it holds this lease, renewed every "
        "third of it; a standby process takes over once it lapses.",
        gt=0,
    )
    standby_boot_wait_s: float = _f(
        0.0,
        "With a standby: a dataplane process that finds another holding the lease (one "
        "restarted after a fault) waits up to this long for the holder's queries to "
        "finish a batch before it starts Spark, so the holder's recovery has the CPU "
        "(`up` and `demo` set 60 with SPS_DATAPLANE_STANDBY; 0: start at once).",
        ge=0,
    )
    epoch_overlap_s: float = _f(
        5.0,
        "How long a task's replicas may go on serving past the end of its epoch, while "
        "Spark ends the batch and starts the next one's tasks (0.2-2 s in which nothing "
        "would be read): the next task for the same slots takes them over without a "
        "pause in the same Python worker, or from their commit in another; not taken "
        "over, they stop this long after the epoch (0: every epoch's replicas stop at "
        "its end, the next epoch's tasks start from their commit; docs/limitations.md).",
        ge=0,
    )
    stop_grace_s: float = _f(
        20.0,
        "On SIGTERM the dataplane ends its tasks' epochs at once, each committing what it "
        "produced, plans no further batch, and stops its queries once the batch under way "
        "is done, waiting at most this long (then stops them as they are: what they "
        "produced since their last checkpoint is produced again at the next start). A "
        "second SIGTERM stops at once. Give `docker stop` a longer grace.",
        ge=0,
    )
    spark_master: str = _f(
        "auto",
        "auto (local[operators x tasks per query]), local[...], spark://..., k8s://...",
    )
    spark_conf: dict[str, str] = Field(
        default_factory=dict,
        description='Extra Spark settings as JSON (\'{"spark.executor.cores": "2"}\').',
    )
    spark_jvm_options: str = _f(
        "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        "Spark's JVM options, driver and executors (unless spark_conf sets them). Its JVMs "
        "plan and launch tasks, out of the per-event path: the quick compiler alone and the "
        "serial collector spend the least CPU at a batch's boundary, CPU the replicas need.",
    )
    executor_python: str | None = _f(None, "The executors' interpreter, if not the driver's.")
    task_max_failures: int = _f(
        4, "Retries of a failed task before the query fails (local[N] retries none).", ge=1
    )
    checkpoint_dir: str = _f(
        "runs/checkpoints",
        "Spark's checkpoints: a folder per key prefix in it (the default prefix's queries at "
        "its top), so a new deployment never takes another's offsets.",
    )
    max_events_per_task: int = _f(20_000, "Most events per replica slot and batch.", ge=1)
    trigger_ms: int = _f(200, "Spark's micro-batch trigger interval.", ge=0)
    cost_mode: CostMode = _f(
        "none",
        "none: the operator's own work; wait: each event occupies its replica et_ms (a "
        "remote call); cpu: real work plus burned CPU up to et_ms. `up` and `demo` give "
        "wait unless it is set (capacity then follows replicas on any machine).",
    )

    def ensemble_cost_mode(self) -> str:
        """The cost mode under ``up`` and ``demo``: wait unless SPS_COST_MODE is set."""
        return self.cost_mode if "cost_mode" in self.model_fields_set else "wait"

    tasks_per_query: int = _f(1, "Spark tasks one micro-batch plans.", ge=1)
    max_batch_s: float = _f(
        1.0, "A replica slot's work per batch, when operators have a cost.", gt=0
    )
    t_out_s: float = _f(0.0, "PA-SPS t_out: older events expire (0: off).", ge=0)
    # the offset and commit logs off the batch's critical path (~130 of a ~1,290 ms batch);
    # a restart then starts each partition where processing really got to
    async_progress: bool = _f(True, "Spark's asyncProgressTrackingEnabled.")
    # registry: for the Tansu broker, whose ListOffsets is wrong for multi-record batches
    partition_ends: Literal["registry", "watermarks"] = _f(
        "watermarks",
        "Where a batch learns partition ends: the broker's high watermarks, or the "
        "producers' delivery reports (registry).",
    )
    operator_failure_share: float = _f(
        MAX_FAILURE_SHARE,
        "An operator raising on more than this share of its last events stops the dataplane.",
        gt=0,
        le=1,
    )
    operator_failure_window: int = _f(FAILURE_WINDOW, "The events that share is taken over.", ge=1)
    sample_events: str | None = _f(
        None, "JSON lines to measure operators without et_ms on (default: the topology's)."
    )
    require_durable_state: bool = _f(
        False,
        "Keyed operators: refuse to start unless Redis keeps an append-only file (else a "
        "warning says their state is lost if Redis restarts).",
    )


S = TypeVar("S", bound=ServiceSettings)


def settings_or_exit(cls: type[S]) -> S:
    """The service's settings, and the connection security every client will use, checked
    now: a bad value stops the service at start naming the variable."""
    from elastic_sps.io.connections import KafkaSecurity, RedisSecurity

    for model, prefix in ((KafkaSecurity, "SPS_KAFKA_"), (RedisSecurity, "SPS_REDIS_")):
        try:
            model()
        except ValidationError as exc:
            _explain(model.__name__, prefix, exc)
    try:
        return cls()
    except ValidationError as exc:
        _explain(cls.__name__, "SPS_", exc)


def _explain(owner: str, prefix: str, exc: ValidationError) -> NoReturn:
    for err in exc.errors():
        where = "__".join(str(p) for p in err["loc"]).upper()
        name = prefix + where if where else prefix + "*"
        print(f"{owner}: bad value for {name}: {err['msg']}", file=sys.stderr)
    raise SystemExit(2) from None
