"""The environment of services a test starts as processes on the session's broker: a
key prefix and control topics of their own, so they read nothing another test left."""

from __future__ import annotations

import uuid

from elastic_sps.io.topics import Topics


def service_env(
    bootstrap: str, redis_url: str, tag_prefix: str = "", **extra: str
) -> tuple[str, Topics, dict[str, str]]:
    """A fresh prefix (``tag_prefix`` and six hex digits), the control topics named
    under it, and the SPS_* environment (``extra`` over it) that hands both over."""
    tag = f"{tag_prefix}{uuid.uuid4().hex[:6]}"
    topics = Topics(**{f: f"{tag}.{v}" for f, v in Topics().model_dump().items()})
    env = {
        "SPS_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "SPS_REDIS_URL": redis_url,
        "SPS_KEY_PREFIX": tag,
        **{f"SPS_TOPICS__{f.upper()}": v for f, v in topics.model_dump().items()},
        **extra,
    }
    return tag, topics, env
