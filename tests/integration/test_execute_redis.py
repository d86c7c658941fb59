import pytest

from elastic_sps.contracts.plan import PlanRecord, RescaleRequest
from elastic_sps.io.envelope import Envelope
from elastic_sps.io.knowledge_base import Keys
from elastic_sps.model import topology
from elastic_sps.services.execute.core import Executor

pytestmark = pytest.mark.integration
TOPO = topology.load("twitter")


def plan(interval, **targets):
    full = {n: 1 for n in TOPO.names} | targets
    return PlanRecord(plan_id=f"interval-{interval}", interval=interval, targets=full, closed_at=0)


def test_apply_once_never_twice_and_never_backwards(redis_client):
    ex = Executor(redis_client, TOPO, Keys("t"))
    ex.bootstrap()
    assert ex.current()["store"] == 1
    a = ex.apply(plan(5, store=4), now=1.0)
    assert a.status == "applied" and a.previous["store"] == 1 and a.plan_latency_s == 1.0
    assert ex.apply(plan(5, store=4)).status == "duplicate"
    assert ex.apply(plan(4, store=7)).status == "stale"
    assert ex.current()["store"] == 4
    assert ex.apply(plan(6, store=99)).targets["store"] == 8  # bounded by the pool


def test_on_demand_requests(redis_client):
    ex = Executor(redis_client, TOPO, Keys("t"))
    ex.bootstrap()
    p = ex.plan_for_request(RescaleRequest(request_id="a", operator="parse", add=2))
    assert p.targets["parse"] == 3
    ex.apply(p)
    assert set(p.targets) == {"parse"}  # a request names only what it changes
    before = ex.current()
    p = ex.plan_for_request(RescaleRequest(request_id="b", add=3, input_eps=2000))
    assert sum(p.targets.values()) - sum(before[n] for n in p.targets) == 3
    with pytest.raises(ValueError, match="unknown operator"):
        ex.plan_for_request(RescaleRequest(request_id="c", operator="nope", replicas=1))


def test_a_password_protected_redis_needs_the_password_setting(monkeypatch):
    """A real redis-server with --requirepass: the project's client authenticates with
    SPS_REDIS_PASSWORD and is refused without it."""
    import redis as redis_py

    from elastic_sps.io.embedded import RedisServer
    from elastic_sps.io.redis_client import redis_client

    server = RedisServer(password="s3cret").start()
    try:
        monkeypatch.delenv("SPS_REDIS_PASSWORD", raising=False)
        with pytest.raises(redis_py.AuthenticationError):
            redis_client(server.url, retries=0).ping()
        monkeypatch.setenv("SPS_REDIS_PASSWORD", "s3cret")
        assert redis_client(server.url, retries=0).ping()
    finally:
        server.stop()


def test_on_demand_scale_in_by_machine(redis_client):
    """SPS_STELA_MACHINE_SLOTS=2, every operator at 2 replicas (8 slots on 4 machines,
    dealt round-robin: m0 and m1 hold parse and classify_author, m2 and m3
    classify_content and store). At the full pool's rate (3,200/s) classify_content is
    congested, so parse's ETP is 0 and the others' 1: m0 (ETPSum 1, m1 ties and loses on
    name) goes, and both its instances are retired (each still has one on m1)."""
    ex = Executor(redis_client, TOPO, Keys("machines"), machine_slots=2)
    ex.bootstrap()
    ex.apply(plan(1, parse=2, classify_content=2, classify_author=2, store=2))
    p = ex.plan_for_request(RescaleRequest(request_id="m", remove=2))
    assert p.targets == {"parse": 1, "classify_author": 1}
    ex.apply(p)
    assert ex.current() == {"parse": 1, "classify_content": 2, "classify_author": 1, "store": 2}


def test_a_periodic_plan_tells_the_ingress_whether_to_shed(redis_client):
    """Scaling before shedding, over a real Redis: execute records the plan's short
    operators; the ingress gate (with a goal) holds LAS while there are none."""
    from elastic_sps.las.gate import Gate

    keys = Keys("short")
    ex = Executor(redis_client, TOPO, keys)
    ex.bootstrap()
    gate = Gate(TOPO, redis_client, keys, 500.0, scale_first=True)

    def held_after(p: PlanRecord) -> bool:
        assert ex.apply(p).status == "applied"
        gate.refresh(force=True)  # it polls at most every 0.1 s otherwise
        assert gate.las is not None
        return gate.las.held

    short = plan(1, classify_content=8).model_copy(update={"short": ["classify_content"]})
    assert held_after(short) is False  # the pool cannot meet the need: LAS may shed
    assert redis_client.get(keys.plan_short) == b"classify_content"
    assert held_after(plan(2, classify_content=4)) is True  # scaling caught up: no shedding
    # an on-demand request says nothing about the need: the flag stays as it was
    ex.apply(ex.plan_for_request(RescaleRequest(request_id="r", operator="parse", add=1)))
    assert redis_client.get(keys.plan_short) == b""


def test_while_the_plan_is_short_the_ingress_admits_what_the_short_operator_clears(
    redis_client,
):
    """Goal 1.8784 s, td 1 s, of which an event's path takes 1.3784 s (et 0.4 + 2.5 + 2.0 +
    1.5 ms, four hops of 0.093 s, one 1 s batch), so the queues may hold 0.5 s. The plan is
    short for classify_content at 2 replicas of 2.5 ms (0.85 x 2 / 2.5 ms = 680 events/s
    delivered), 600 events recorded as waiting, of which the running batch has processed
    half a 1 s batch on average (340): 260 queued. Admitting a keeps its queue clearable
    in the 0.5 s while a ≤ 680 x (0.5 + 1) - 260 = 760 (1,784 with the whole goal). Of
    1,000 events LAS alone admits all (parse has 8 replicas: 0.05 s of work), the bound
    760; the rest is shed, none lost. Once the plan is no longer short: no bound."""

    from elastic_sps.las.gate import Gate

    keys = Keys("bound")
    ex = Executor(redis_client, TOPO, keys)
    ex.bootstrap()
    short = plan(1, parse=8, classify_content=2).model_copy(update={"short": ["classify_content"]})
    assert ex.apply(short).status == "applied"
    topic = keys.topic("classify_content")
    redis_client.hset(keys.ends(topic), mapping={"0": 300, "1": 300})
    goal_s = 1.8784 + 1e-9  # the 1e-9: 0.5 s left, not 0.4999...
    gate = Gate(TOPO, redis_client, keys, 500.0, scale_first=True, goal_s=goal_s, td=1.0)
    gate.refresh(force=True)
    raws = [
        (Envelope(f"e{i}", 0.0, "source", {"key": f"k{i % 50}"}), f"k{i % 50}") for i in range(1000)
    ]
    d = gate.decide(raws, now=0.0)
    assert len(d.admitted) == 760 and len(d.shed) == 240
    assert ex.apply(plan(2, parse=8, classify_content=4)).status == "applied"
    gate.budget_interval = -1  # the next interval
    gate.refresh(force=True)
    assert len(gate.decide(raws, now=0.0).admitted) == 1000
    # parse is at its full pool but clears its (empty) queue: it bounds nothing. Now
    # classify_content is at its pool of 8 with 4,800 recorded and the plan not short:
    # 0.85 x 8 / 2.5 ms = 2,720 events/s; 4,800 - 2,720 x 0.5 = 3,440 queued;
    # a ≤ 2,720 x 1.5 - 3,440 = 640.
    assert ex.apply(plan(3, parse=8, classify_content=8)).status == "applied"
    redis_client.hset(keys.ends(topic), mapping={str(j): 600 for j in range(8)})
    gate.budget_interval = -1
    gate.refresh(force=True)
    assert gate.las is not None and gate.las.held  # LAS waits for a short plan...
    assert len(gate.decide(raws, now=0.0).admitted) == 640  # ...the pool's bound does not
