"""Typed settings per service, from environment variables prefixed ``SPS_``.

A bad value stops the service at start with a message naming the variable
(``settings_or_exit``).
"""

from __future__ import annotations

import dataclasses
import math
import sys
from typing import Literal, NoReturn, TypeVar

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.stabilise import DEFAULT_STABILISER, PRESETS, Stabilisation
from shared.topics import Topics

# What the services run when a user sets nothing (SPS_POLICY, SPS_PREDICTOR): the Basic
# forecast sized at 70 % utilisation, with the calm stabiliser (shared.stabilise) on top.
# Chosen on benchmarks/bench_control.py's dominance group (docs/2026-11-24-control.md):
# it saves more than DS2 and AUTOSCALE on every trace of the set at a mean latency within
# a few ms of DS2's on most. The library's
# own default (``make_policy("pa-sps")``) stays the paper's LR.
DEFAULT_POLICY = "pa-sps"
DEFAULT_PREDICTOR = "basic@0.7"


class ServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SPS_", extra="ignore", env_nested_delimiter="__")

    kafka_bootstrap_servers: str = "127.0.0.1:9092"
    redis_url: str = "redis://127.0.0.1:6379/0"
    key_prefix: str = "sps"
    topology: str = "twitter"
    td: float = Field(default=1.0, gt=0)
    web_port: int = Field(default=0, ge=0, le=65535)  # 0: pick a free port
    web_host: str = "127.0.0.1"
    kafka_session_timeout_s: float = Field(default=6.0, gt=0)
    # The longest a faust service's fetch waits for records (services/faust_fetch.py:
    # faust fixes 1,500 ms, and the embedded broker answers only when it runs out).
    kafka_fetch_max_wait_ms: int = Field(default=50, ge=1, le=30_000)
    topics: Topics = Field(default_factory=Topics)
    # Record every event id at every stage (shared/id_ledger.py): the report's `lost` by
    # id, per operator. Costs Redis memory per event: runs, tests and audits.
    track_ids: bool = False
    # Run the whole loop and record every decision, but change no replica count (execute
    # logs what it would have applied): for trying a policy on a production pipeline.
    dry_run: bool = False
    # The dataplane's: a task keeps serving its active replicas' partitions for
    # task_window_s after it starts, reading what upstream produces meanwhile, so an event
    # crosses several operators in one micro-batch instead of waiting for one batch per
    # hop: twitter at 50 % load, mean latency 4.1 s -> 0.74 s (README, "An event crosses
    # the operators in one batch"). Between two batches (~0.15 s) no replica serves: a
    # longer window loses less of the pool's capacity (0.6 s -> 1.0 s: static:8 0.90 ->
    # 0.66 s mean on short-spikes). 0: a task reads its planned offset range only. Here,
    # not in DataplaneSettings: the ingress's admission bound needs the batch length.
    task_window_s: float = Field(default=1.0, ge=0)
    # The cores CPU-bound operators' replicas run on: the dataplane gives each replica a
    # Spark task (a process) up to this many, and the plan never counts on more (None:
    # this machine's; on a cluster, executors × cores).
    cores: int | None = Field(default=None, ge=1)

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
    # An interval normally closes as soon as the ingress's count of it arrives; this is
    # how long after its end it may wait for that count. Late source counts are folded
    # into the next interval and shift λ_G by one (measured live: every count one
    # interval late with 1.0 s), so it exceeds the ingress's own wait for a lagging read
    # (services.ingress.arrivals, max_wait_s 1.5 s); it costs plan latency only then.
    close_grace_s: float = Field(default=2.0, ge=0)


class AnalyzeSettings(ServiceSettings):
    policy: str = DEFAULT_POLICY
    # basic, lr, fft, ann, rf; "auto" (the most accurate recently: shared/selection.py),
    # "bandit"; "@U" sizes at utilisation U (e.g. basic@0.7)
    predictor: str = DEFAULT_PREDICTOR
    latency_goal_ms: float | None = Field(default=None, gt=0)  # pa-sps:bandit's reward


class PlanSettings(ServiceSettings):
    budget: int | None = Field(default=None, ge=0)
    # shared/stabilise.py: fewer, calmer rescales. A preset by name ("calm", measured:
    # README, "No flapping"; "none": the papers' policies as written), and each rule may
    # be set on its own over it (unset: the preset's). The window is in seconds here.
    stabiliser: str = DEFAULT_STABILISER
    scale_down_window_s: float | None = Field(default=None, ge=0)
    max_step: int | None = Field(default=None, ge=1)
    scale_down_margin: float | None = Field(default=None, ge=0)
    hold_on_backlog: bool | None = None
    # a raw need at most this many replicas (or this fraction of the count) above the
    # count does not scale out; a scale-in of less than this fraction of the count is
    # held; a need that fell through the whole window is followed at its latest ask
    scale_up_tolerance: float | None = Field(default=None, ge=0)
    scale_up_tolerance_ratio: float | None = Field(default=None, ge=0)
    scale_down_tolerance_ratio: float | None = Field(default=None, ge=0, lt=1)
    follow_falling_need: bool | None = None
    # the user's goal: each operator gets at least the replicas that clear its backlog
    # within it (shared.plan.goal_replicas); a need beyond the pool marks the plan short
    latency_goal_ms: float | None = Field(default=None, gt=0)

    @field_validator("stabiliser")
    @classmethod
    def _known_preset(cls, v: str) -> str:
        if v not in PRESETS:
            raise ValueError(f"unknown stabiliser {v!r}; choose from {', '.join(PRESETS)}")
        return v

    def stabilisation(self) -> Stabilisation:
        """The preset with the rules set here over it; the window in intervals of td."""
        preset = PRESETS[self.stabiliser]
        window = (
            preset.scale_down_window
            if self.scale_down_window_s is None
            else math.ceil(self.scale_down_window_s / self.td - 1e-9)
        )
        rules = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(Stabilisation)
            if f.name != "scale_down_window" and getattr(self, f.name) is not None
        }
        return dataclasses.replace(preset, scale_down_window=window, **rules)


class ExecuteSettings(ServiceSettings):
    redis_retry_max_s: float = Field(default=5.0, gt=0)
    # On-demand scale-in by whole machines of N replica slots (Stela); None: by replica.
    stela_machine_slots: int | None = Field(default=None, ge=1)


class IngressSettings(ServiceSettings):
    tau_ms: float | None = Field(default=None, gt=0)  # LAS goal; None: admit everything
    # the user's latency goal: LAS's τ if tau_ms is unset, and LAS sheds only while the
    # plan says scaling cannot meet the need (Keys.plan_short)
    latency_goal_ms: float | None = Field(default=None, gt=0)
    las_horizon_s: float = Field(default=30.0, gt=0)  # the goal averages over ~this long
    # dotted path of the attribute the LAS sketches key on, when the topology's
    # ``source.key`` does not say (json records only; empty: no key, LAS sheds nothing)
    key_field: str = "key"
    write_shed: bool = False  # also write shed events to the sps.shed topic
    batch: int = Field(default=5000, ge=1)
    # consume() waits all of this when fewer than ``batch`` records are there; interval t's
    # count leaves only after a read begun past t's end came back, so this is plan delay
    poll_timeout_s: float = Field(default=0.05, gt=0)
    # how long after t's end a record stamped in t may still reach the broker (the
    # producer's linger and send): t's count waits this long, then for a read begun after
    arrival_grace_s: float = Field(default=0.15, ge=0)


class DataplaneSettings(ServiceSettings):
    # "auto": local[operators × tasks_per_query], one Spark task slot per task a
    # micro-batch plans, so the queries never wait for each other's slots.
    spark_master: str = "auto"  # or local[…], local-cluster[…], spark://…, k8s://…
    # Extra Spark settings, as JSON (SPS_SPARK_CONF='{"spark.executor.cores": "2"}'):
    # a k8s image, executor sizes, spark.archives for a packed environment.
    spark_conf: dict[str, str] = Field(default_factory=dict)
    executor_python: str | None = None  # the executors' interpreter, if not the driver's path
    # A failed task (a broker hiccup, a delivery failure) is retried this often before the
    # query fails: local[N] alone retries nothing (spark.task.maxFailures on a cluster).
    task_max_failures: int = Field(default=4, ge=1)
    checkpoint_dir: str = "runs/checkpoints"
    max_events_per_task: int = Field(default=20_000, ge=1)  # per replica slot and batch
    trigger_ms: int = Field(default=200, ge=0)
    # none: the operator's own work; wait: each event occupies its replica et_ms (an
    # operator bound by a remote call); cpu: real work plus burned CPU up to et_ms.
    cost_mode: Literal["none", "wait", "cpu"] = "none"
    synthetic_cost: bool = False  # deprecated alias of cost_mode=cpu
    tasks_per_query: int = Field(default=1, ge=1)  # Spark tasks one micro-batch plans
    max_batch_s: float = Field(default=1.0, gt=0)  # a slot's work per batch, with a cost
    t_out_s: float = Field(default=0.0, ge=0)  # PA-SPS t_out: older events expire; 0 off
    # Spark's asyncProgressTrackingEnabled: the offset and commit logs are written off the
    # batch's critical path (walCommit + commitOffsets ~130 of a ~1,290 ms batch, none of
    # it serving a replica). A restart may then replay from an older checkpoint; the
    # source starts each partition where processing really got to (``{prefix}:dp:<op>:
    # committed``), so nothing is processed twice.
    async_progress: bool = True
    one_query: bool = True  # every operator in one streaming query (False: one each)
    # Where a micro-batch learns how far each partition goes: "watermarks", the broker's
    # high watermarks (one batched ListOffsets a batch; right on Apache Kafka);
    # "registry", the ends the producers record from their delivery reports (for the
    # Tansu broker, whose ListOffsets is wrong for multi-record batches). Either only
    # bounds what a batch reads; progress is the checkpoint.
    partition_ends: Literal["registry", "watermarks"] = "watermarks"
    fixed_replicas: int | None = Field(default=None, ge=1)  # ignore Redis (benchmark baseline)
    # A user's operator with on_error: dead-letter stops the dataplane (a bug, not bad
    # input) when more than this share of its last `operator_failure_window` events raised.
    operator_failure_share: float = Field(default=0.5, gt=0, le=1)
    operator_failure_window: int = Field(default=200, ge=1)
    # JSON lines of payloads to measure operators without et_ms on (default: the
    # topology's source.sample_events or generator)
    sample_events: str | None = None


S = TypeVar("S", bound=ServiceSettings)


def settings_or_exit(cls: type[S]) -> S:
    """The service's settings, and the connection security every client will use, checked
    now: a bad value stops the service at start naming the variable."""
    from shared.connections import KafkaSecurity, RedisSecurity

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
