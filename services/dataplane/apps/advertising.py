"""The Yahoo streaming benchmark's advertising application (AUTOSCALE §V Fig. 11)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

from shared.envelope import BadEvent

WINDOW_S = 10


def deserialize(payload: Any, ctx: Any) -> list[tuple[str | None, Any]]:
    ev = json.loads(payload) if isinstance(payload, str) else payload
    if not isinstance(ev, dict) or not {"ad_id", "event_type", "event_time"} <= set(ev):
        raise BadEvent("deserialize: an ad event needs ad_id, event_type and event_time")
    return [(None, ev)]


def filter_views(ev: Any, ctx: Any) -> list[tuple[str | None, Any]]:
    return [(None, ev)] if ev["event_type"] == "view" else []


def ad_projection(ev: Any, ctx: Any) -> list[tuple[str | None, Any]]:
    return [(None, {"ad_id": ev["ad_id"], "event_time": ev["event_time"]})]


def ip_projection(ev: Any, ctx: Any) -> list[tuple[str | None, Any]]:
    return [(None, {"ip": ev.get("ip_address", "0.0.0.0"), "event_time": ev["event_time"]})]


def join(ev: Any, ctx: Any) -> list[tuple[str | None, Any]]:
    campaign = ctx.redis.hget(f"{ctx.prefix}:app:advertising:campaigns", ev["ad_id"])
    if campaign is None:
        return []  # an ad of no known campaign: the benchmark drops it
    return [(None, {**ev, "campaign_id": campaign.decode()})]


def campaign_processor(ev: Any, ctx: Any) -> list[tuple[str | None, Any]]:
    window = int(ev["event_time"]) // (WINDOW_S * 1000) * WINDOW_S
    ctx.writes.hincrby(f"{ctx.prefix}:app:advertising:window:{window}", ev["campaign_id"], 1)
    return []


def ip_processor(ev: Any, ctx: Any) -> list[tuple[str | None, Any]]:
    ctx.writes.pfadd(f"{ctx.prefix}:app:advertising:users", ev["ip"])
    return []


OPERATORS = {
    "deserialize": deserialize,
    "filter": filter_views,
    "ad_projection": ad_projection,
    "ip_projection": ip_projection,
    "join": join,
    "campaign_processor": campaign_processor,
    "ip_processor": ip_processor,
}


def seed_campaigns(redis: Any, prefix: str, ads: int = 1000, campaigns: int = 100) -> None:
    redis.hset(
        f"{prefix}:app:advertising:campaigns",
        mapping={f"ad{k}": f"campaign{k % campaigns}" for k in range(ads)},
    )


def generate(n: int, seed: int = 0, ads: int = 1000) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    for k in range(n):
        yield {
            "user_id": f"u{rng.randint(1, 10**6)}",
            "page_id": f"p{rng.randint(1, 1000)}",
            "ad_id": f"ad{rng.randrange(ads)}",
            "ad_type": rng.choice(["banner", "modal", "mail"]),
            "event_type": rng.choice(["view", "click", "purchase"]),
            "event_time": 1_700_000_000_000 + k,
            "ip_address": f"10.1.{rng.randint(0, 255)}.{rng.randint(0, 255)}",
        }
