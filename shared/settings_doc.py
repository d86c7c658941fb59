"""The settings table in the README, generated from the settings' own descriptions.

``python -m elastic_sps.settings_doc --write`` rewrites the blocks between the markers: the
README's (the settings a user sets first) and ``docs/settings.md``'s (every one);
``tests/unit/test_settings_doc.py`` fails when a field lacks a description or a block is
stale.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from elastic_sps import settings as s
from elastic_sps.io import connections
from elastic_sps.io.topics import Topics

BEGIN = "<!-- settings:begin (generated: python -m elastic_sps.settings_doc --write) -->"
END = "<!-- settings:end -->"
FILES = ("README.md", "docs/settings.md")
# The README's short table: what a user sets first (docs/settings.md has every setting)
FIRST = (
    "SPS_KAFKA_BOOTSTRAP_SERVERS",
    "SPS_REDIS_URL",
    "SPS_TOPOLOGY",
    "SPS_TD",
    "SPS_POLICY",
    "SPS_PREDICTOR",
    "SPS_STABILISER",
    "SPS_LATENCY_GOAL_MS",
    "SPS_TAU_MS",
    "SPS_BUDGET",
    "SPS_CORES",
    "SPS_TRACK_IDS",
    "SPS_DRY_RUN",
    "SPS_SPARK_MASTER",
    "SPS_COST_MODE",
    "SPS_KAFKA_SECURITY_PROTOCOL",
    "SPS_IMAGE",
)

# (who reads it, the settings class): a field is listed under the first class that has it
OWNERS: tuple[tuple[str, type[BaseSettings]], ...] = (
    ("any process", s.LocalSettings),
    ("every service", s.ServiceSettings),
    ("monitor", s.MonitorSettings),
    ("analyze", s.AnalyzeSettings),
    ("plan", s.PlanSettings),
    ("execute", s.ExecuteSettings),
    ("admission: ingress, or dataplane", s.AdmissionSettings),
    ("ingress", s.IngressSettings),
    ("dataplane", s.DataplaneSettings),
    ("every client", connections.KafkaSecurity),
    ("every client", connections.RedisSecurity),
)


# Read by docker compose and compose/stack.sh, not by Python: (default, description)
DEPLOYMENT: dict[str, tuple[str, str]] = {
    "SPS_IMAGE": ("elastic-sps:latest", "The services' image (yours, with your package)."),
    "SPS_KAFKA_IMAGE": ("elastic-sps/kafka:4.1.1", "The Apache Kafka broker's image."),
    "SPS_REDIS_IMAGE": ("elastic-sps/redis:7", "redis-server's image."),
    "SPS_PROMETHEUS_IMAGE": ("elastic-sps/prometheus:2", "Prometheus's image."),
    "SPS_PROMETHEUS_CONFIG": ("prometheus.yml", "Prometheus's configuration file."),
    "SPS_PUBLISH_HOST": ("127.0.0.1", "The host address compose publishes ports on."),
    "SPS_HEALTH_INTERVAL": (
        "10s",
        "How often compose runs the services' and Spark's health checks (a dependent "
        "starts once they pass).",
    ),
    "SPS_COMPOSE_PROJECT": ("elastic-sps", "stack.sh's compose project name."),
    "SPS_COMPOSE_ENV_FILE": ("compose/.env", "stack.sh's env file for compose."),
    "SPS_DOCKER_ROOT": ("/var/lib/elastic-sps-docker", "The private Docker engine's state."),
    "SPS_DOCKER_RUN": ("/run/elastic-sps-docker", "The private engine's socket folder."),
    "SPS_DEBIAN_MIRROR": ("apt's", "The mirror the Debian base image is debootstrapped from."),
}


def variable(cls: type[BaseSettings], name: str, field: FieldInfo) -> str:
    if isinstance(field.validation_alias, str):
        return field.validation_alias
    return f"{cls.model_config.get('env_prefix', '')}{name}".upper()


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        return "see below" if field.annotation is Topics else "{}"
    value: Any = field.default
    return "–" if value is None else f"`{str(value).lower() if isinstance(value, bool) else value}`"


def rows() -> Iterator[tuple[str, str, str, str]]:
    """(variable, read by, default, description) for every setting, topics expanded."""
    seen: set[str] = set()
    for owner, cls in OWNERS:
        for name, field in cls.model_fields.items():
            var = variable(cls, name, field)
            if var in seen:
                continue
            seen.add(var)
            if field.annotation is Topics:
                for topic, default in Topics().model_dump().items():
                    yield (f"SPS_TOPICS__{topic.upper()}", owner, f"`{default}`", "Topic name.")
                continue
            yield var, owner, _default(field), field.description or ""
    for var, (default, text) in DEPLOYMENT.items():
        yield var, "compose", f"`{default}`", text


def missing_descriptions() -> list[str]:
    return [var for var, _, _, text in rows() if not text]


def table(only: tuple[str, ...] | None = None) -> str:
    lines = ["| variable | read by | default | what it does |", "|---|---|---|---|"]
    lines += [
        f"| `{v}` | {who} | {d} | {text} |"
        for v, who, d, text in rows()
        if only is None or v in only
    ]
    return "\n".join(lines)


def block(file: str) -> str:
    """The generated block of ``file`` (one of ``FILES``)."""
    return f"{BEGIN}\n{table(FIRST if file == 'README.md' else None)}\n{END}"


def replace_block(text: str, file: str) -> str:
    """``text`` with its settings block replaced by the current one."""
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + block(file) + text[end:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"rewrite the blocks of {FILES}")
    args = ap.parse_args()
    if not args.write:
        print(table())
        return
    root = Path(__file__).resolve().parents[1]
    for file in FILES:
        path = root / file
        path.write_text(replace_block(path.read_text(), file))


if __name__ == "__main__":
    main()
