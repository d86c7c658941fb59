from pathlib import Path

import pytest
import yaml

from services.cli.ensemble import SERVICES

pytestmark = pytest.mark.unit
COMPOSE = Path(__file__).parents[2] / "compose"


def test_compose_file_is_valid_and_names_every_service():
    doc = yaml.safe_load((COMPOSE / "docker-compose.yml").read_text())
    services = doc["services"]
    for name in (
        *SERVICES,
        "kafka",
        "redis",
        "spark-master",
        "spark-worker",
        "prometheus",
        "grafana",
    ):
        assert name in services, name
    for name in SERVICES:
        env = services[name]["environment"]
        assert env["SPS_KAFKA_BOOTSTRAP_SERVERS"] == "kafka:9092"
        assert services[name]["command"] == f"services.{name}"
    assert (
        "KRaft" in (COMPOSE / "docker-compose.yml").read_text()
        or services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"
    )


def test_prometheus_scrapes_every_service_with_metrics():
    doc = yaml.safe_load((COMPOSE / "prometheus" / "prometheus.yml").read_text())
    targets = doc["scrape_configs"][0]["static_configs"][0]["targets"]
    for name in ("ingress", "monitor", "analyze", "plan", "execute"):
        assert f"{name}:8000" in targets


def test_grafana_dashboard_is_provisioned():
    import json

    dash = json.loads((COMPOSE / "grafana" / "dashboards" / "elastic-sps.json").read_text())
    titles = {p["title"] for p in dash["panels"]}
    assert {"Active replicas per operator", "Shed ratio", "Input rate vs prediction"} <= titles
