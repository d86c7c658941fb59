"""The data source's options are a view of the dataplane's settings: every setting
travels to the tasks as JSON and back, declared once (in ``elastic_sps.settings``), and read
back from the JSON alone."""

from __future__ import annotations

import json
import os
import pickle
from typing import Any

import pytest

from elastic_sps.model import topology
from elastic_sps.services.dataplane.options import CostMode, SourceOptions
from elastic_sps.settings import DataplaneSettings

pytestmark = pytest.mark.unit

# Not one of them a default, nested and optional ones included.
CHOSEN: dict[str, Any] = dict(
    kafka_bootstrap_servers="broker:9093",
    redis_url="redis://kb:6380/2",
    key_prefix="run7",
    td=0.5,
    task_window_s=0.6,
    track_ids=True,
    cores=3,
    topics={"metrics": "m7", "deadletter": "d7"},
    spark_conf={"spark.executor.cores": "2"},
    max_events_per_task=300,
    tasks_per_query=2,
    max_batch_s=0.25,
    t_out_s=4.0,
    cost_mode="cpu",
    partition_ends="registry",
    fixed_replicas=5,
    operator_failure_share=0.2,
    operator_failure_window=50,
    idle_s=7.0,
)


@pytest.fixture(autouse=True)
def no_sps_environment(monkeypatch):
    for name in [n for n in os.environ if n.startswith("SPS_")]:
        monkeypatch.delenv(name)


def options(cost_mode: CostMode = "wait", **settings: Any) -> SourceOptions:
    topo = topology.load("twitter")
    chosen = DataplaneSettings(**{**CHOSEN, **settings})
    return SourceOptions.build(chosen, topo, ["parse", "store"], cost_mode)


def test_the_options_declare_no_setting_of_their_own():
    assert set(SourceOptions.model_fields) == {
        "settings", "operators", "topology_name", "topology_doc", "las", "entry_topic",
        "entry_partitions", "holder",
    }  # fmt: skip
    assert not set(SourceOptions.model_fields) & set(DataplaneSettings.model_fields)


def test_every_setting_travels_as_json_and_back():
    opts = options()
    sent = json.loads(opts.to_spark()["settings"])
    assert set(sent["settings"]) == set(DataplaneSettings.model_fields)
    back = SourceOptions.from_spark(opts.to_spark())
    assert back == opts
    assert back.operators == ("parse", "store") and back.topology()["store"].max_replicas == 8
    # every setting as the driver had it, the cost mode as the driver resolved it
    expected = {**DataplaneSettings(**CHOSEN).model_dump(), "cost_mode": "wait"}
    assert back.settings.model_dump() == expected


def test_the_tasks_read_the_settings_by_their_names():
    back = SourceOptions.from_spark(options().to_spark())
    read = {
        "bootstrap": "broker:9093",
        "redis_url": "redis://kb:6380/2",
        "prefix": "run7",
        "td": 0.5,
        "cost_mode": "wait",
        "cores": 3,
        "task_window_s": 0.6,
        "t_out_s": 4.0,
        "track_ids": True,
        "failure_share": 0.2,
        "failure_window": 50,
        "partition_ends": "registry",
        "metrics_topic": "m7",
        "deadletter_topic": "d7",
        "las": True,
        "topology_name": "twitter",
    }
    assert {name: getattr(back, name) for name in read} == read


def test_an_executors_environment_plays_no_part(monkeypatch):
    sent = options().to_spark()
    monkeypatch.setenv("SPS_TD", "9")
    monkeypatch.setenv("SPS_TOPICS__METRICS", "elsewhere")
    monkeypatch.setenv("SPS_SPARK_CONF", "{not json")  # would stop a settings read
    back = SourceOptions.from_spark(sent)
    assert (back.td, back.metrics_topic, back.settings.spark_conf) == (
        0.5,
        "m7",
        {"spark.executor.cores": "2"},
    )


def test_the_cores_are_the_drivers(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 7)
    sent = options(cores=None).to_spark()
    monkeypatch.setattr(os, "cpu_count", lambda: 64)  # an executor's machine
    back = SourceOptions.from_spark(sent)
    assert (back.cores, back.settings.cores) == (7, 7)


def test_the_options_pickle_to_the_workers():
    opts = options()
    back = pickle.loads(pickle.dumps(opts))
    assert back == opts and back.bootstrap == "broker:9093"
