"""What every process on this machine reads (services, command line and tests alike),
below the services' settings so that the embedded servers and the trace loader can read it
(``elastic_sps.settings`` re-exports it)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def described(default: Any, description: str, **constraints: Any) -> Any:
    """A field with its description (the README's settings table is generated from it)."""
    return Field(default=default, description=description, **constraints)


class LocalSettings(BaseSettings):
    """What every process on this machine reads, services, command line and tests alike."""

    model_config = SettingsConfigDict(env_prefix="SPS_", extra="ignore")

    log_level: str = described("INFO", "Python logging level of every process (DEBUG, INFO, ...).")
    log_format: Literal["text", "json"] = described(
        "text", "Log lines as plain text, or one JSON object a line (for a log collector)."
    )
    dataplane_standby: bool = described(
        False,
        "`up` and `demo` start a second dataplane process that stands by, warm, and takes "
        "over the queries when the first one dies (``SPS_LEASE_S`` after it).",
    )
    embedded_broker: Literal["kafka", "tansu"] = described(
        "kafka", "The broker `up`, `demo` and the tests start when none is given: Apache Kafka."
    )
    kafka_home: str | None = described(
        None, "Apache Kafka's unpacked distribution (default: ~/.cache/elastic-sps/kafka-*)."
    )
    trace_dir: str | None = Field(
        default=None,
        validation_alias="ELASTIC_SPS_TRACE_DIR",
        description="A folder of trace CSVs that trace names are also looked up in.",
    )
    # the unprefixed names of earlier releases still work
    external_kafka: str | None = Field(
        default=None,
        validation_alias=AliasChoices("SPS_EXTERNAL_KAFKA", "KAFKA_BOOTSTRAP_SERVERS"),
        description="`up`, `demo` and the tests use this broker instead of starting one.",
    )
    external_redis: str | None = Field(
        default=None,
        validation_alias=AliasChoices("SPS_EXTERNAL_REDIS", "REDIS_URL"),
        description="`up`, `demo` and the tests use this Redis instead of starting one.",
    )
