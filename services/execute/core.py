"""Execute: write a plan's active-replica counts to Redis exactly once per plan id, and
never an older interval's plan over a newer one's; for each count that changes, the
operator's rescale marker (``elastic_sps.io.rescale_timeline``) in the same script, and for a
periodic plan the operators it is short for (the ingress gate's ``plan:short``).

The check (was this plan applied?) and the writes happen in one Lua script, so a plan
replayed after a crash — Redis written, offset not yet committed — changes nothing.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from elastic_sps.contracts.action import ActionRecord
from elastic_sps.contracts.base import ContractError
from elastic_sps.contracts.plan import PlanRecord, RescaleRequest
from elastic_sps.control import stela
from elastic_sps.io.knowledge_base import Keys, KnowledgeBase
from elastic_sps.model.topology import Topology

# Applied plan ids live in a sorted set by application order, trimmed to the newest
# APPLIED_KEPT: a replay after a crash is of recent plans, and a set would grow forever
# (86k ids a day at td = 1 s).
APPLIED_KEPT = 10_000
_APPLY = """
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return {0} end
local interval = tonumber(ARGV[2])
if interval > 0 and interval <= tonumber(redis.call('GET', KEYS[2]) or '0') then
  return {2}
end
local n = (#KEYS - 3) / 2
local kept, decided, now, short = ARGV[3 + n], ARGV[4 + n], ARGV[5 + n], ARGV[6 + n]
local prev = {1}
for i = 1, n do
  local old = redis.call('GET', KEYS[2 + i]) or '0'
  prev[#prev + 1] = old
  redis.call('SET', KEYS[2 + i], ARGV[2 + i])
  if tonumber(old) ~= tonumber(ARGV[2 + i]) then
    local marker = KEYS[2 + n + i]
    redis.call('DEL', marker)
    redis.call('HSET', marker, 'plan_id', ARGV[1], 'from', old, 'to', ARGV[2 + i],
               'decided_at', decided, 'applied_at', now)
  end
end
local seq = redis.call('INCR', KEYS[1] .. ':seq')
redis.call('ZADD', KEYS[1], seq, ARGV[1])
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(tonumber(kept) + 1))
if interval > 0 then
  redis.call('SET', KEYS[2], interval)
  redis.call('SET', KEYS[#KEYS], short)
end
return prev
"""


class Executor:
    def __init__(
        self,
        redis: Any,
        topology: Topology,
        keys: Keys | None = None,
        machine_slots: int | None = None,
    ) -> None:
        self.r = redis
        self.topology = topology
        self.keys = keys or Keys()
        self.kb = KnowledgeBase(redis, self.keys)
        # Set: an on-demand scale-in removes whole machines of this many replica slots
        # (Stela's slides 14-16); None: single replicas, lowest ETP first.
        self.machine_slots = machine_slots
        self._apply = redis.register_script(_APPLY)

    def bootstrap(self) -> None:
        """Pool sizes, benchmarked et and (if unset) the minimum active counts."""
        self.kb.bootstrap(self.topology.operators)

    def current(self) -> dict[str, int]:
        return self.kb.actives(self.topology.operators)

    def apply(self, plan: PlanRecord, now: float | None = None) -> ActionRecord:
        names = [n for n in self.topology.names if n in plan.targets]
        unknown = set(plan.targets) - set(self.topology.names)
        if unknown:
            raise ContractError(f"plan {plan.plan_id} names unknown operators {sorted(unknown)}")
        bounded = {}
        for n in names:
            op = self.topology[n]
            bounded[n] = max(op.min_replicas, min(op.max_replicas, int(plan.targets[n])))
        now = time.time() if now is None else now
        # the active counts, then each operator's rescale marker (elastic_sps.io.rescale_timeline)
        keys = [self.keys.applied_plans, self.keys.last_plan]
        keys += [self.keys.active(n) for n in names] + [self.keys.rescale(n) for n in names]
        keys += [self.keys.plan_short]  # a periodic plan says whether scaling meets the need
        args = [plan.plan_id, plan.interval] + [bounded[n] for n in names]
        args += [APPLIED_KEPT, repr(plan.decided_at), repr(now), ",".join(plan.short)]
        res = self._apply(keys=keys, args=args)
        if int(res[0]) != 1:
            # 0: this plan id was applied before; 2: a newer interval's plan already was.
            status: Literal["duplicate", "stale"] = "duplicate" if int(res[0]) == 0 else "stale"
            return ActionRecord(
                plan_id=plan.plan_id, status=status, previous={}, targets=bounded, applied_at=now
            )
        previous = {n: int(v) for n, v in zip(names, res[1:], strict=True)}
        return ActionRecord(
            plan_id=plan.plan_id,
            status="applied",
            previous=previous,
            targets=bounded,
            applied_at=now,
            plan_latency_s=max(0.0, now - plan.closed_at),
        )

    def plan_for_request(self, req: RescaleRequest) -> PlanRecord:
        """Turn an on-demand request into a plan: one operator, or N slots by Stela ETP.
        The plan names only the operators the request changes, so it cannot write stale
        counts over a newer periodic plan's for the others."""
        current = self.current()
        targets = dict(current)
        if req.operator is not None:
            if req.operator not in current:
                raise ContractError(f"unknown operator {req.operator!r}")
            base = current[req.operator]
            n = (
                req.replicas
                if req.replicas is not None
                else base + (req.add or 0) - (req.remove or 0)
            )
            targets[req.operator] = n
        else:
            rate = req.input_eps if req.input_eps is not None else self.topology.capacity_eps()
            if req.add:
                targets, _ = stela.scale_out(self.topology, rate, current, req.add)
            elif self.machine_slots is not None:
                targets, _ = stela.scale_in_machines(
                    self.topology, rate, current, req.remove or 0, self.machine_slots
                )
            else:
                targets, _ = stela.scale_in(self.topology, rate, current, req.remove or 0)
        changed = {n: v for n, v in targets.items() if v != current.get(n)}
        return PlanRecord(
            plan_id=f"request-{req.request_id}", interval=0, targets=changed, closed_at=time.time()
        )
