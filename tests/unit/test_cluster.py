"""The dataplane's cluster checks: what the executors must share with the driver."""

from __future__ import annotations

import zipfile

import pytest

from elastic_sps.model import topology
from elastic_sps.services.dataplane.cluster import (
    ExecutorReport,
    forwarded_env,
    is_cluster,
    mismatches,
    project_zip,
)
from elastic_sps.services.dataplane.options import SourceOptions

pytestmark = pytest.mark.unit


def test_which_masters_have_executors():
    assert not is_cluster("local") and not is_cluster("local[8,4]")
    assert is_cluster("local-cluster[2,1,1024]")
    assert is_cluster("spark://spark-master:7077") and is_cluster("k8s://https://k:6443")


def test_each_mismatch_is_named_with_its_executor():
    fine = ExecutorReport("w1:100", "3.11", "4.3.0", ())
    other_python = ExecutorReport("w2:200", "3.10", "4.3.0", ())
    other_spark = ExecutorReport("w3:300", "3.11", "4.0.1", ("redis",))
    assert mismatches("3.11", "4.3.0", [fine]) == []
    assert mismatches("3.11", "4.3.1", [fine]) == []  # a patch release is the same Spark
    assert mismatches("3.11", "4.3.0", [other_python, other_spark]) == [
        "w2:200: Python 3.10, driver 3.11",
        "w3:300: Spark 4.0.1, driver's pyspark 4.3.0",
        "w3:300: cannot import redis",
    ]


def test_the_shipped_zip_holds_both_packages_and_their_data(tmp_path):
    names = zipfile.ZipFile(project_zip(tmp_path)).namelist()
    assert "elastic_sps/services/dataplane/replica.py" in names
    assert "elastic_sps/topologies/twitter.yaml" in names  # read through importlib.resources
    assert not any(n.startswith(("shared/", "services/")) for n in names)
    assert not any("__pycache__" in n for n in names)


def test_credentials_reach_the_executors_and_nothing_else():
    env = {"SPS_KAFKA_SASL_PASSWORD": "pw", "SPS_REDIS_PASSWORD": "r", "HOME": "/root"}
    assert forwarded_env(env) == {
        "spark.executorEnv.SPS_KAFKA_SASL_PASSWORD": "pw",
        "spark.executorEnv.SPS_REDIS_PASSWORD": "r",
    }


def test_the_options_carry_the_resolved_topology_as_its_text(tmp_path):
    """An executor elsewhere has no copy of the file, nor the driver's measurement: the
    options carry the topology's text with its costs, typed, and read back alike."""
    from elastic_sps.settings import DataplaneSettings

    path = tmp_path / "mine.yaml"
    path.write_text(
        "name: mine\noperators:\n"
        "  - {name: parse, max_replicas: 2, code: 'x.y:z'}\n"
        "edges:\n  - {from: source, to: parse}\n"
    )
    topo = topology.load(path).with_costs({"parse": (1.5, 0.9)})
    opts = SourceOptions.build(DataplaneSettings(cores=3), topo, ["parse"], "none")
    path.unlink()
    back = SourceOptions.from_spark(opts.to_spark())
    assert back == opts and back.cores == 3 and back.partition_ends == "watermarks"
    parse = back.topology()["parse"]
    assert (parse.max_replicas, parse.et_ms, parse.cpu_share, parse.code) == (2, 1.5, 0.9, "x.y:z")


def test_the_users_operator_package_ships_with_the_project(tmp_path, monkeypatch):
    """A user package importable on the driver (here: written outside the repository)
    goes into the zip the executors import from, beside elastic_sps."""
    import zipfile

    from elastic_sps.services.dataplane.cluster import project_zip

    pkg = tmp_path / "src" / "mypipe"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "ops.py").write_text("def f(p, ctx):\n    return [(None, p)]\n")
    (tmp_path / "src" / "single.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    names = zipfile.ZipFile(
        project_zip(tmp_path, ["mypipe.ops", "single", "elastic_sps.model.topology"])
    ).namelist()
    assert {"mypipe/ops.py", "mypipe/__init__.py", "single.py"} <= set(names)
    assert "elastic_sps/model/topology.py" in names
    assert "elastic_sps/services/dataplane/replica.py" in names


def test_local_workers_fork_from_a_daemon_that_imported_the_replicas():
    from elastic_sps.services.dataplane.job import session_conf
    from elastic_sps.settings import DataplaneSettings

    settings = DataplaneSettings()
    daemon = "spark.python.daemon.module"
    assert session_conf(settings, "local[4,4]")[daemon] == "elastic_sps.services.dataplane.daemon"
    # an executor may hold the project only as the shipped zip: Spark's own daemon
    assert daemon not in session_conf(settings, "spark://spark-master:7077")


def test_sparks_jvms_get_the_jvm_options_unless_the_users_spark_conf_sets_them():
    from elastic_sps.services.dataplane.job import session_conf
    from elastic_sps.settings import DataplaneSettings

    conf = session_conf(DataplaneSettings(spark_jvm_options="-XX:+UseSerialGC"), "local[2,4]")
    assert conf["spark.driver.extraJavaOptions"] == "-XX:+UseSerialGC"
    assert conf["spark.executor.extraJavaOptions"] == "-XX:+UseSerialGC"
    mine = {"spark.driver.extraJavaOptions": "-Xss4m"}
    conf = session_conf(DataplaneSettings(spark_conf=mine), "local[2,4]")
    assert conf["spark.driver.extraJavaOptions"] == "-Xss4m"
    assert "spark.driver.extraJavaOptions" not in session_conf(
        DataplaneSettings(spark_jvm_options=""), "local[2,4]"
    )


def test_the_daemon_preloads_what_imports_and_skips_what_does_not():
    import gc

    from elastic_sps.services.dataplane.daemon import preload

    assert preload(("json", "no_such_module_here")) == ["json"]
    gc.unfreeze()  # the test process's heap back to the collector


def test_the_daemons_serving_tasks_are_told_by_their_command_line():
    from elastic_sps.services.dataplane.daemon import serves_tasks

    py = "/venv/bin/python"
    assert serves_tasks([py, "-m", "elastic_sps.services.dataplane.daemon", "pyspark.worker"])
    assert serves_tasks([py, "-m", "pyspark.daemon", "pyspark.worker"])
    # a daemon for the driver's data source calls, a plain worker, the JVM naming the module
    assert not serves_tasks([py, "-m", "pyspark.daemon", "pyspark.sql.worker.plan"])
    assert not serves_tasks([py, "-m", "pyspark.worker"])
    assert not serves_tasks(["java", "--conf", "spark.python.daemon.module=pyspark.daemon"])
