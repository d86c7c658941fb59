"""The data source's options: a view of the dataplane's settings (``DataplaneSettings``,
declared once, with their descriptions, in ``elastic_sps.settings``) plus the few things that
are the query's own. Spark carries them to every task as one JSON string option (its data
source options are strings), and the tasks read them back with the same types."""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from elastic_sps.settings import CostMode, DataplaneSettings

__all__ = ["CostMode", "ResolvedSettings", "SourceOptions"]


class ResolvedSettings(DataplaneSettings):
    """The settings as the driver resolved them, read back from the options alone: an
    executor's own environment (another machine's SPS_* variables) plays no part."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


class SourceOptions(BaseModel):
    """What a micro-batch's planning (driver) and its tasks (executors) need."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    settings: ResolvedSettings
    operators: tuple[str, ...]
    topology_name: str
    # the topology travels as its text, costs resolved: an executor on another machine
    # (or in another container) needs no copy of the file, nor a measurement of its own
    topology_doc: str
    las: bool = True  # the entry operators feed the LAS sketches
    # admission at the entry step: the source topic its replicas read, and its partitions
    entry_topic: str | None = None
    entry_partitions: int = 0
    # the dataplane process (its lease id) whose query this is: its serving tasks name it
    # (``Keys.tasks_serving``), which its /health waits for
    holder: str = ""

    @classmethod
    def build(
        cls,
        settings: DataplaneSettings,
        topo: Any,
        operators: list[str],
        cost_mode: CostMode,
        entry: tuple[str, int] | None = None,
        holder: str = "",
    ) -> SourceOptions:
        """The cores are resolved here: an executor's own CPU count is not the plan's.
        ``entry``: the source topic the entry operator reads and its partitions, with
        admission at the entry step."""
        resolved = {"cores": settings.cores_or_local(), "cost_mode": cost_mode}
        return cls(
            entry_topic=entry[0] if entry else None,
            entry_partitions=entry[1] if entry else 0,
            holder=holder,
            settings=ResolvedSettings(**{**settings.model_dump(), **resolved}),
            operators=tuple(operators),
            topology_name=topo.name,
            topology_doc=yaml.safe_dump(topo.to_dict()),
        )

    def to_spark(self) -> dict[str, str]:
        return {"settings": self.model_dump_json()}

    @classmethod
    def from_spark(cls, options: dict[str, str]) -> SourceOptions:
        return cls.model_validate_json(options["settings"])

    def topology(self) -> Any:
        from elastic_sps.model import topology

        return topology.from_dict(yaml.safe_load(self.topology_doc), self.topology_name)

    # -- the names the tasks read the settings by ------------------------------------------
    @property
    def bootstrap(self) -> str:
        return self.settings.kafka_bootstrap_servers

    @property
    def redis_url(self) -> str:
        return self.settings.redis_url

    @property
    def prefix(self) -> str:
        return self.settings.key_prefix

    @property
    def td(self) -> float:
        return self.settings.td

    @property
    def cost_mode(self) -> CostMode:
        return self.settings.cost_mode

    @property
    def cores(self) -> int:
        return self.settings.cores_or_local()

    @property
    def task_window_s(self) -> float:
        return self.settings.task_window_s

    @property
    def t_out_s(self) -> float:
        return self.settings.t_out_s

    @property
    def track_ids(self) -> bool:
        return self.settings.track_ids

    @property
    def failure_share(self) -> float:
        return self.settings.operator_failure_share

    @property
    def failure_window(self) -> int:
        return self.settings.operator_failure_window

    @property
    def partition_ends(self) -> str:
        return self.settings.partition_ends

    @property
    def metrics_topic(self) -> str:
        return self.settings.topics.metrics

    @property
    def deadletter_topic(self) -> str:
        return self.settings.topics.deadletter
