"""The compose deployment, started and driven: every image built without a registry,
a user's pipeline in an image FROM the project's, every container healthy, a replay from
the host with nothing lost by id, a rescale seen in the Spark cluster's executors,
Prometheus scraping every target, a killed container restarted, and `down` then `up`
resuming from the volumes. Skipped, with the reason, where no Docker engine can run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from elastic_sps.io.knowledge_base import Keys, KnowledgeBase
from tests.support.user_project import expected_value, write_package, write_readings

pytestmark = pytest.mark.compose
ROOT = Path(__file__).parents[2]
STACK = ROOT / "compose" / "stack.sh"
PROJECT = "sps-compose-test"
PASSWORD = "compose-test-only"
USER_IMAGE = "sps-compose-test-user:latest"
CHAIN = "square..offset"  # the two operators, chained (the default): one pool
OPS = (CHAIN,)
TRACE = "short-spikes"

TOPOLOGY = """
name: squares
source: {topics: [readings], key: "field:sensor", sample_events: readings.jsonl}
operators:
  - {name: square, code: "userpipe.ops:square", max_replicas: 4, et_ms: 2}
  - {name: offset, code: "userpipe.ops:Offset", max_replicas: 4, output: results}
edges:
  - {from: source, to: square}
  - {from: square, to: offset}
"""

# How a user gets their package into the image (docs/measurements.md, "Deploying").
USER_DOCKERFILE = """
FROM elastic-sps:latest
USER root
COPY . /app/user
RUN pip install --no-cache-dir /app/user && chown -R sps /app/user
USER sps
"""


def sh(*args: str, env: dict[str, str] | None = None, timeout: float = 900) -> str:
    done = subprocess.run(
        args, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(args)}: exit {done.returncode}\n{done.stderr[-3000:]}")
    return done.stdout


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    had_private = Path("/run/elastic-sps-docker/docker.pid").exists()
    done = subprocess.run([str(STACK), "engine"], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        pytest.skip(f"no Docker engine can run here: {done.stderr.strip()}")
    host = done.stdout.strip()
    yield host
    if not had_private:
        subprocess.run([str(STACK), "engine-stop"], timeout=60)


@pytest.fixture(scope="module")
def stack(engine, tmp_path_factory) -> Iterator[dict[str, str]]:
    env = {"DOCKER_HOST": engine, "SPS_COMPOSE_PROJECT": PROJECT}
    t0 = time.monotonic()
    if os.environ.get("SPS_TEST_IMAGES_BUILT") != "1":  # set by make, which just built them
        sh(str(STACK), "build", env=env, timeout=1800)
    user = tmp_path_factory.mktemp("user-image")
    write_package(user)
    (user / "squares.yaml").write_text(TOPOLOGY)
    write_readings(user / "readings.jsonl", 100)
    (user / "Dockerfile").write_text(USER_DOCKERFILE)
    sh("docker", "build", "-q", "-t", USER_IMAGE, str(user), env=env)
    built_s = time.monotonic() - t0
    env_file = tmp_path_factory.mktemp("compose-env") / ".env"
    env_file.write_text(
        f"REDIS_PASSWORD={PASSWORD}\nSPS_PUBLISH_HOST=127.0.0.1\nSPS_IMAGE={USER_IMAGE}\n"
        "SPS_TOPOLOGY=/app/user/squares.yaml\nSPS_TRACK_IDS=true\nSPS_COST_MODE=wait\n"
        "SPARK_WORKER_MEMORY=1g\n"
        # each start waits on spark-master -> worker -> dataplane turning healthy; 3 s
        # was no faster here (9 checks of ~0.15 CPU-s each, every 3 s, on 2 cores)
        "SPS_HEALTH_INTERVAL=5s\n"
    )
    env["SPS_COMPOSE_ENV_FILE"] = str(env_file)
    env["HOST_TOPOLOGY"] = str(user / "squares.yaml")
    sh(str(STACK), "compose", "down", "-v", env=env)  # an earlier run's leftovers
    try:
        sh(str(STACK), "compose", "up", "-d", env=env)
        wait_healthy(env)
        print(f"compose: images built in {built_s:.0f} s, healthy {time.monotonic() - t0:.0f} s in")
        yield env
    finally:
        logs = subprocess.run(
            [str(STACK), "compose", "logs", "--tail", "40", "dataplane", "ingress"],
            capture_output=True,
            text=True,
            env={**os.environ, **env},
        )
        print(logs.stdout[-6000:])
        down = [str(STACK), "compose", "down", "-v"]
        subprocess.run(down, env={**os.environ, **env}, timeout=300)


def containers(env: dict[str, str]) -> dict[str, dict]:
    """Service name -> its container's `docker inspect`, for every container of the
    project: one `docker ps` and one `docker inspect` (each CLI call costs CPU the stack
    starting beside it needs)."""
    label = f"label=com.docker.compose.project={PROJECT}"
    cids = sh("docker", "ps", "-aq", "--filter", label, env=env).split()
    out = {}
    for info in json.loads(sh("docker", "inspect", *cids, env=env)) if cids else []:
        name = info["Config"]["Labels"]["com.docker.compose.service"]
        number = info["Config"]["Labels"].get("com.docker.compose.container-number", "1")
        out[f"{name}-{number}" if name == "spark-worker" else name] = info
    return out


def wait_healthy(env: dict[str, str], timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while True:
        states = {
            name: (info["State"].get("Health") or {}).get("Status", info["State"]["Status"])
            for name, info in containers(env).items()
        }
        if len(states) >= 11 and all(s == "healthy" for s in states.values()):
            return
        assert time.monotonic() < deadline, f"not all healthy after {timeout} s: {states}"
        time.sleep(1)


def redis_client():
    import redis

    return redis.Redis(host="127.0.0.1", port=6379, password=PASSWORD)


def replay(env: dict[str, str], seconds: float = 15) -> int:
    """The whole trace played in ``seconds``."""
    from elastic_sps.model import traces

    speedup = traces.load(TRACE).duration_s / seconds
    out = sh(
        sys.executable,
        "-m",
        "elastic_sps.services.cli",
        "replay",
        "--bootstrap",
        "127.0.0.1:9094",
        "--topology",
        env["HOST_TOPOLOGY"],
        "--trace",
        TRACE,
        "--peak-rate",
        "60",
        "--speedup",
        str(speedup),
        env={"PYTHONPATH": str(ROOT)},
    )
    return int(out.split()[1])


def wait_all_accounted(expected_sent: int, timeout: float = 300) -> list:
    """Until every id sent to each operator is processed there, by id; returns the
    stage accounts."""
    from elastic_sps.io import id_ledger

    r = redis_client()
    deadline = time.monotonic() + timeout
    while True:
        stages = id_ledger.stage_accounts(r, "sps", OPS)
        if stages[0].sent >= expected_sent and all(s.lost == 0 for s in stages):
            return stages
        assert time.monotonic() < deadline, f"not drained after {timeout} s: {stages}"
        time.sleep(1)


def test_the_stack_runs_a_users_pipeline_and_survives_what_a_deployment_meets(stack):
    t0 = time.monotonic()
    # the Redis password is on no process's command line (it is in a config file)
    redis_info = containers(stack)["redis"]
    assert PASSWORD not in sh("docker", "top", redis_info["Id"], "-eo", "pid,args", env=stack)
    assert PASSWORD not in json.dumps(redis_info["Config"]["Cmd"])
    sent = replay(stack)
    stages = wait_all_accounted(sent)
    assert stages[0].sent == sent and stages[-1].processed == sent  # nothing lost by id

    # a rescale from the host reaches the replicas on the Spark cluster's executors. The
    # analyze service is paused meanwhile, as an operator forcing a count would: its
    # next plan (every td) would otherwise set the policy's count back within a second.
    # Micro-batches run only while events flow: a short replay after the rescale.
    r = redis_client()
    sh(str(STACK), "compose", "stop", "analyze", env=stack)
    cli = (sys.executable, "-m", "elastic_sps.services.cli")
    rescale = ("rescale", "--operator", CHAIN, "--replicas", "3")
    sh(*cli, *rescale, "--bootstrap", "127.0.0.1:9094", env={"PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 60
    while r.get(Keys().active(CHAIN)) != b"3":
        assert time.monotonic() < deadline, "execute did not apply the rescale"
        time.sleep(0.5)
    sent += replay(stack, seconds=10)  # long enough for a batch planned with 3
    # the replicas serve the new count at once; the next epoch (SPS_TASK_WINDOW_S) is
    # planned with it. The chain admits at its entry step (SPS_ADMISSION=auto: one
    # stateless entry chain, its source topic made with a partition per replica), so
    # its 3 replicas own the source's 4 partitions between them.
    deadline = time.monotonic() + 90
    while True:
        batches = KnowledgeBase(r).batches(CHAIN)
        if any(b["active"] == 3 and b["slots"] == [0, 1, 2, 3] for b in batches):
            break
        assert time.monotonic() < deadline, batches[-5:]
        time.sleep(1)
    executors = {e.split(":")[0] for e in KnowledgeBase(r).executors(CHAIN)}
    assert executors and "dataplane" not in executors, executors  # tasks ran on the workers
    sh(str(STACK), "compose", "start", "analyze", env=stack)
    wait_all_accounted(sent)

    # Prometheus scrapes every target
    deadline = time.monotonic() + 120
    while True:
        with urllib.request.urlopen("http://127.0.0.1:9090/api/v1/targets", timeout=5) as page:
            targets = json.load(page)["data"]["activeTargets"]
        down = [(t["labels"]["job"], t["lastError"]) for t in targets if t["health"] != "up"]
        if targets and not down:
            break
        assert time.monotonic() < deadline, f"targets not up: {down}"
        time.sleep(1)
    assert {t["labels"]["job"] for t in targets} >= {"ingress", "dataplane", "spark-worker"}

    # a killed service comes back (restart: unless-stopped) and nothing is lost
    monitor = containers(stack)["monitor"]
    os.kill(monitor["State"]["Pid"], 9)  # a crash, as a host's OOM killer would do it
    # restarted before health is awaited: else the old, healthy state could pass for it
    deadline = time.monotonic() + 60
    while containers(stack)["monitor"]["RestartCount"] < 1:
        assert time.monotonic() < deadline, "the killed monitor was not restarted"
        time.sleep(0.5)
    wait_healthy(stack, timeout=300)
    restarts = containers(stack)["monitor"]["RestartCount"]
    assert restarts >= 1
    sent += replay(stack, seconds=8)
    wait_all_accounted(sent)

    # down, then up: the volumes keep the topics, offsets, checkpoints and the ledger
    sh(str(STACK), "compose", "down", env=stack)
    sh(str(STACK), "compose", "up", "-d", env=stack)
    wait_healthy(stack)
    sent += replay(stack, seconds=8)
    stages = wait_all_accounted(sent)
    assert stages[0].sent == sent and stages[-1].processed == sent
    # the output topic holds each event's output once, right
    from elastic_sps.io.kafka_io import read_topic

    rows = read_topic("127.0.0.1:9094", "results", max_s=60)
    assert len(rows) == len({row["id"] for row in rows}) == sent
    assert all(row["value"]["v"] == expected_value(row["value"]) for row in rows)
    print(f"compose test: driven in {time.monotonic() - t0:.0f} s, {sent} events, lost 0")
