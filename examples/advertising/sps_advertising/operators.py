"""The Yahoo streaming benchmark's advertising application (AUTOSCALE §V Fig. 11)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

from elastic_sps.io.envelope import BadEvent

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


class Join:
    """The ad-to-campaign join, as a class operator: ``open`` (once per worker) makes
    sure the campaign table is in Redis and loads it, so ``process`` looks up a dict."""

    def open(self, ctx: Any) -> None:
        key = f"{ctx.prefix}:app:advertising:campaigns"
        if ctx.redis is not None and not ctx.redis.exists(key):
            seed_campaigns(ctx.redis, ctx.prefix)
        raw = ctx.redis.hgetall(key) if ctx.redis is not None else {}
        self.campaigns = {k.decode(): v.decode() for k, v in raw.items()} or CAMPAIGNS

    def process(self, ev: Any, ctx: Any) -> list[tuple[str | None, Any]]:
        campaign = self.campaigns.get(ev["ad_id"])
        if campaign is None:
            return []  # an ad of no known campaign: the benchmark drops it
        return [(None, {**ev, "campaign_id": campaign})]

    def close(self) -> None:
        self.campaigns = {}


def campaign_processor(ev: Any, ctx: Any) -> list[tuple[str | None, Any]]:
    window = int(ev["event_time"]) // (WINDOW_S * 1000) * WINDOW_S
    ctx.writes.hincrby(f"{ctx.prefix}:app:advertising:window:{window}", ev["campaign_id"], 1)
    return []


def ip_processor(ev: Any, ctx: Any) -> list[tuple[str | None, Any]]:
    ctx.writes.pfadd(f"{ctx.prefix}:app:advertising:users", ev["ip"])
    return []


ADS, CAMPAIGN_COUNT = 1000, 100
CAMPAIGNS = {f"ad{k}": f"campaign{k % CAMPAIGN_COUNT}" for k in range(ADS)}


def seed_campaigns(redis: Any, prefix: str) -> None:
    redis.hset(f"{prefix}:app:advertising:campaigns", mapping=CAMPAIGNS)


def generate(n: int, seed: int = 0, ads: int = ADS) -> Iterator[dict[str, Any]]:
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
