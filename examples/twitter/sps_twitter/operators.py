"""The PA-SPS Twitter application (§4.1.1): parse, classify by content, by author, store.

Plain functions ``(payload, ctx) -> [(successor or None, payload)]``: elastic-sps loads
them by the ``code:`` keys of ``topology.yaml``. An operator that raises on an event has
that event dead-lettered with the reason (``on_error``, README "Your pipeline")."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from typing import Any

TOPICS = {
    "health": re.compile(r"\b(covid|vaccine|virus|mask|hospital)\b", re.I),
    "politics": re.compile(r"\b(election|vote|government|minister|law)\b", re.I),
    "sports": re.compile(r"\b(match|goal|team|league|win)\b", re.I),
}
WORDS = [
    "covid",
    "vaccine",
    "virus",
    "mask",
    "hospital",
    "election",
    "vote",
    "government",
    "minister",
    "law",
    "match",
    "goal",
    "team",
    "league",
    "win",
    "today",
    "people",
    "world",
    "news",
    "great",
    "new",
]


def parse(payload: Any, ctx: Any) -> list[tuple[str | None, Any]]:
    tweet = json.loads(payload) if isinstance(payload, str) else payload
    if not isinstance(tweet, dict) or not isinstance(tweet.get("text"), str):
        raise ValueError("a tweet needs a 'text' string")
    user = tweet.get("user") or {}
    return [
        (
            None,
            {
                "text": tweet["text"],
                "user": str(user.get("screen_name", "")),
                "followers": int(user.get("followers_count", 0)),
                "verified": bool(user.get("verified", False)),
            },
        )
    ]


def classify_content(t: Any, ctx: Any) -> list[tuple[str | None, Any]]:
    hits = [name for name, rx in TOPICS.items() if rx.search(t["text"])]
    return [(None, {**t, "topic": hits[0] if hits else "other"})]


def classify_author(t: Any, ctx: Any) -> list[tuple[str | None, Any]]:
    kind = "influencer" if t["verified"] or t["followers"] > 10_000 else "regular"
    return [(None, {**t, "author_class": kind})]


def store(t: Any, ctx: Any) -> list[tuple[str | None, Any]]:
    """Counts per (topic, author class) in Redis (``ctx.writes``: batched, one round trip
    per few hundred events), and the classified tweet as the sink's output."""
    if ctx.writes is not None:
        ctx.writes.hincrby(
            f"{ctx.prefix}:app:twitter:counts", f"{t['topic']}:{t['author_class']}", 1
        )
    return [(None, {"user": t["user"], "topic": t["topic"], "author_class": t["author_class"]})]


def generate(n: int, seed: int = 0) -> Iterator[dict[str, Any]]:
    """Sample tweets shaped like the Twitter API's."""
    rng = random.Random(seed)
    for k in range(n):
        yield {
            "id": k,
            "text": " ".join(rng.choices(WORDS, k=rng.randint(5, 15))),
            "user": {
                "screen_name": f"user{rng.randint(1, 5000)}",
                "followers_count": int(rng.paretovariate(1.2) * 100),
                "verified": rng.random() < 0.02,
            },
        }
