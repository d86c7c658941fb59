"""The compose deployment, read as data: what must hold for it to start and be observed.

`docker compose config` validates the file where the docker CLI has compose; the rest is
checked here on any machine: healthchecks and healthy-conditions, listeners, volumes,
exposure, Prometheus covering every container, Grafana naming only exported metrics (the
names are read from the services' own registries)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from elastic_sps.io.knowledge_base import Keys
from elastic_sps.model import topology
from elastic_sps.services.cli.ensemble import SERVICES

pytestmark = pytest.mark.unit
ROOT = Path(__file__).parents[2]
COMPOSE = ROOT / "compose"


def compose_doc() -> dict:
    return yaml.safe_load((COMPOSE / "docker-compose.yml").read_text())


def test_every_service_runs_from_the_project_image_and_reaches_kafka_inside():
    services = compose_doc()["services"]
    for name in (*SERVICES, "dataplane"):
        assert services[name]["command"] == f"elastic_sps.services.{name}"
        assert services[name]["environment"]["SPS_KAFKA_BOOTSTRAP_SERVERS"] == "kafka:9092"
        assert services[name]["image"] == "${SPS_IMAGE:-elastic-sps:latest}"
    # the Spark cluster runs the same image: one Python, one Spark, the driver's pyspark
    # (and a user's operators, in an image FROM it: SPS_IMAGE)
    for name in ("spark-master", "spark-worker"):
        assert services[name]["image"] == "${SPS_IMAGE:-elastic-sps:latest}"
    assert services["dataplane"]["environment"]["SPS_SPARK_MASTER"] == "spark://spark-master:7077"


def test_kafka_has_an_internal_and_a_host_listener():
    env = compose_doc()["services"]["kafka"]["environment"]
    advertised = dict(item.split("://") for item in env["KAFKA_ADVERTISED_LISTENERS"].split(","))
    assert advertised == {"INTERNAL": "kafka:9092", "HOST": "localhost:9094"}


def test_every_container_is_health_checked_and_waited_for():
    services = compose_doc()["services"]
    for name, svc in services.items():
        assert "healthcheck" in svc, f"{name} has no healthcheck"
        assert svc.get("restart") == "unless-stopped", name
        deps = svc.get("depends_on", {})
        assert isinstance(deps, dict), f"{name}: depends_on without conditions"
        for dep, cond in deps.items():
            assert cond == {"condition": "service_healthy"}, (name, dep)


def test_ports_bind_loopback_by_default_and_state_lives_on_volumes():
    doc = compose_doc()
    for name, svc in doc["services"].items():
        for port in svc.get("ports", []):
            assert port.startswith("${SPS_PUBLISH_HOST:-127.0.0.1}:"), (name, port)
    volumes = {
        name: [v.split(":")[0] for v in svc.get("volumes", [])]
        for name, svc in doc["services"].items()
    }
    assert "kafka-data" in volumes["kafka"]
    assert "redis-data" in volumes["redis"]
    assert "checkpoints" in volumes["dataplane"]
    assert {"kafka-data", "redis-data", "checkpoints"} <= set(doc["volumes"])
    # a password is required, and given in the environment, not on a command line
    redis = doc["services"]["redis"]
    assert redis["environment"]["REDIS_PASSWORD"].startswith("${REDIS_PASSWORD:?")
    assert not any("PASSWORD" in part for part in redis["command"])
    assert doc["services"]["ingress"]["environment"]["SPS_REDIS_PASSWORD"].startswith(
        "${REDIS_PASSWORD:?"
    )


def test_the_image_runs_as_a_non_root_user_and_ships_only_the_project():
    dockerfile = (ROOT / "Dockerfile").read_text()
    users = re.findall(r"^USER\s+(\S+)", dockerfile, re.M)
    assert users and users[-1] not in {"root", "0"}
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "runs", "tests"} <= set(ignored)


def test_prometheus_scrapes_every_container():
    """The default profile's containers by prometheus.yml (every target it names runs),
    with the `extras` profile's too by prometheus.extras.yml."""
    doc = compose_doc()
    configs = {}
    for name in ("prometheus.yml", "prometheus.extras.yml"):
        prom = yaml.safe_load((COMPOSE / "prometheus" / name).read_text())
        configs[name] = {job["job_name"] for job in prom["scrape_configs"]}
    default = {n for n, svc in doc["services"].items() if not svc.get("profiles")}
    for name, svc in doc["services"].items():
        scraped_as = svc.get("labels", {}).get("sps.scraped-by", name)
        if scraped_as in doc["services"] and doc["services"][scraped_as].get("profiles"):
            assert scraped_as in configs["prometheus.extras.yml"], name
            continue
        assert scraped_as in configs["prometheus.extras.yml"], name
        if name in default:
            assert scraped_as in configs["prometheus.yml"], f"{name} is not scraped"
    assert configs["prometheus.yml"] <= default | {"prometheus"}  # no job without a target


def exported_metric_names() -> set[str]:
    """Every metric family the services and the dataplane register, by building them."""
    from elastic_sps import settings
    from elastic_sps.services.analyze.__main__ import build as analyze
    from elastic_sps.services.dataplane.observe import DataplaneCollector
    from elastic_sps.services.execute.__main__ import build as execute
    from elastic_sps.services.ingress.loop import IngressMetrics
    from elastic_sps.services.monitor.__main__ import build as monitor
    from elastic_sps.services.plan.__main__ import build as plan

    registries = [
        analyze(settings.AnalyzeSettings()).metrics.registry,
        execute(settings.ExecuteSettings()).metrics.registry,
        monitor(settings.MonitorSettings()).metrics.registry,
        plan(settings.PlanSettings()).metrics.registry,
    ]
    ingress = CollectorRegistry()
    IngressMetrics(ingress)
    names = {family.name for reg in (*registries, ingress) for family in reg.collect()}
    # the dataplane's collector reads Redis at scrape time; its names come from describe()
    dataplane = DataplaneCollector(None, Keys(), topology.load("twitter"), list)
    names |= {family.name for family in dataplane.describe()}
    return names


def test_every_grafana_panel_names_an_exported_metric():
    exported = exported_metric_names()
    suffixes = ("", "_total", "_bucket", "_sum", "_count")
    dash = json.loads((COMPOSE / "grafana" / "dashboards" / "elastic-sps.json").read_text())
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            for name in re.findall(r"\bsps_[a-z_]+", target["expr"]):
                assert any(name == e + s for e in exported for s in suffixes), (
                    f"panel {panel['title']!r} uses {name}, which no service exports"
                )


def test_the_dashboard_tells_services_apart():
    dash = json.loads((COMPOSE / "grafana" / "dashboards" / "elastic-sps.json").read_text())
    titles = {p["title"] for p in dash["panels"]}
    assert {"Active replicas per operator", "Shed ratio", "Input rate vs prediction"} <= titles


def _compose_cli() -> list[str] | None:
    """Compose v2 (`docker compose`) if the CLI has it, else Debian's v1.29
    (`docker-compose`); `config` needs no engine."""
    if (
        shutil.which("docker")
        and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0
    ):
        return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


@pytest.mark.skipif(_compose_cli() is None, reason="no compose CLI (v2 or v1) here")
def test_docker_compose_config_validates(tmp_path):
    env = tmp_path / ".env"
    env.write_text("REDIS_PASSWORD=test-only\n")
    cli = _compose_cli() or []
    out = subprocess.run(
        [
            *cli,
            "-p",
            "check",
            "-f",
            str(COMPOSE / "docker-compose.yml"),
            "--env-file",
            str(env),
            "config",
            "--quiet",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr


def test_up_prometheus_runs_compose_s_jobs_against_local_ports():
    from elastic_sps.services.ensemble.prometheus import local_config

    doc = local_config({"ingress": 4101, "dataplane": 4102}, self_port=4100)
    jobs = {j["job_name"]: j for j in doc["scrape_configs"]}
    assert set(jobs) == {"ingress", "dataplane", "prometheus"}  # nothing else runs here
    assert jobs["dataplane"]["static_configs"] == [{"targets": ["127.0.0.1:4102"]}]
    assert jobs["prometheus"]["static_configs"] == [{"targets": ["127.0.0.1:4100"]}]
    compose = yaml.safe_load((COMPOSE / "prometheus" / "prometheus.yml").read_text())
    assert doc["global"] == compose["global"]
