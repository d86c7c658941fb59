"""The data source's options as one typed object: the driver builds it from the
dataplane's settings and the resolved topology, Spark carries it to every task as one
JSON string option (Spark's data source options are strings), and the tasks read it back
with the same types and defaults, never parsing strings of their own."""

from __future__ import annotations

from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict

from shared.model.windows import IDLE_S
from shared.pipeline.failures import FAILURE_WINDOW, MAX_FAILURE_SHARE

CostMode = Literal["none", "wait", "cpu"]


class SourceOptions(BaseModel):
    """What a micro-batch's planning (driver) and its tasks (executors) need."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    operators: tuple[str, ...]
    topology_name: str
    # the topology travels as its text, costs resolved: an executor on another machine
    # (or in another container) needs no copy of the file, nor a measurement of its own
    topology_doc: str
    bootstrap: str
    redis_url: str
    prefix: str = "sps"
    td: float = 1.0
    max_per_task: int = 20_000
    cost_mode: CostMode = "none"
    tasks_per_query: int = 1
    cores: int = 1  # a CPU-bound operator's replicas get a task each up to this many
    max_batch_s: float = 1.0
    t_out_s: float = 0.0
    task_window_s: float = 0.0
    track_ids: bool = False
    las: bool = True  # the entry operators feed the LAS sketches
    metrics_topic: str = "sps.metrics"
    deadletter_topic: str = "sps.deadletter"
    fixed_replicas: int | None = None
    partition_ends: Literal["registry", "watermarks"] = "watermarks"
    failure_share: float = MAX_FAILURE_SHARE
    failure_window: int = FAILURE_WINDOW
    idle_s: float = IDLE_S  # a window operator's input silent this long holds no window open

    @classmethod
    def build(
        cls, settings: Any, topo: Any, operators: list[str], cost_mode: CostMode
    ) -> SourceOptions:
        """From the dataplane's settings (``shared.settings.DataplaneSettings``)."""
        return cls(
            operators=tuple(operators),
            topology_name=topo.name,
            topology_doc=yaml.safe_dump(topo.to_dict()),
            bootstrap=settings.kafka_bootstrap_servers,
            redis_url=settings.redis_url,
            prefix=settings.key_prefix,
            td=settings.td,
            max_per_task=settings.max_events_per_task,
            cost_mode=cost_mode,
            tasks_per_query=settings.tasks_per_query,
            cores=settings.cores_or_local(),
            max_batch_s=settings.max_batch_s,
            t_out_s=settings.t_out_s,
            task_window_s=settings.task_window_s,
            track_ids=settings.track_ids,
            metrics_topic=settings.topics.metrics,
            deadletter_topic=settings.topics.deadletter,
            fixed_replicas=settings.fixed_replicas,
            partition_ends=settings.partition_ends,
            failure_share=settings.operator_failure_share,
            failure_window=settings.operator_failure_window,
            idle_s=settings.idle_s,
        )

    def to_spark(self) -> dict[str, str]:
        return {"settings": self.model_dump_json()}

    @classmethod
    def from_spark(cls, options: dict[str, str]) -> SourceOptions:
        return cls.model_validate_json(options["settings"])

    def topology(self) -> Any:
        from shared.model import topology

        return topology.from_dict(yaml.safe_load(self.topology_doc), self.topology_name)
