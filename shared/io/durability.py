"""Whether the Redis holding keyed state keeps it across a restart, said at start and
checked as the dataplane plans.

Keyed state and the input offset it reflects are committed together in Redis
(``elastic_sps.io.state_store``); Spark's checkpoint holds only offsets. A Redis that loses its
data (memory only, restarted) loses both, and Spark's offsets would then serve the
partition with empty state. So the dataplane says at start when Redis is not durable
(``check_keyed_state``), and a keyed partition whose commit vanished stops the query
(``StateLostError``) rather than go on with empty state.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from redis.exceptions import ResponseError

from elastic_sps.io.knowledge_base import Keys

log = logging.getLogger("sps.durability")

FIX = "run redis-server with `appendonly yes` (and a data directory that survives it)"


@dataclass(frozen=True)
class Durability:
    """``durable``: True (an append-only file), False (memory or snapshots only), None
    (unknown: the server does not answer CONFIG GET)."""

    durable: bool | None
    description: str


class NotDurableError(RuntimeError):
    """Durable state is required (``SPS_REQUIRE_DURABLE_STATE``) and Redis is not."""


class StateLostError(RuntimeError):
    """A keyed partition's committed offset vanished while Spark had moved past 0."""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def classify(config: Mapping[str, str]) -> Durability:
    """From CONFIG GET's answers (appendonly, appendfsync, dir, save)."""
    aof = config.get("appendonly")
    if aof is None:
        return Durability(None, "unknown (Redis did not report `appendonly`)")
    if aof == "yes":
        where, fsync = config.get("dir", "?"), config.get("appendfsync", "?")
        return Durability(True, f"append-only file in {where} (appendfsync {fsync})")
    if config.get("save"):  # a restart goes back to the last snapshot
        return Durability(False, f"snapshots only (save {config['save']})")
    return Durability(False, "memory only")


def redis_durability(r: Any) -> Durability:
    """Ask Redis how it keeps its data (one parameter a call: Redis 6 takes one)."""
    pipe = r.pipeline(transaction=False)
    for name in ("appendonly", "appendfsync", "dir", "save"):
        pipe.config_get(name)
    try:
        answers = pipe.execute()
    except ResponseError as exc:  # a managed Redis renames or forbids CONFIG
        return Durability(None, f"unknown (CONFIG GET refused: {exc})")
    config = {_text(k): _text(v) for answer in answers for k, v in answer.items()}
    return classify(config)


def _warning(found: Durability, stateful: list[str]) -> str:
    ops = ", ".join(stateful)
    if found.durable is None:
        return (
            f"Redis's durability is {found.description}: the keyed state of {ops} will be "
            f"lost if Redis restarts without an append-only file; make sure it has one ({FIX})"
        )
    return (
        f"Redis keeps no append-only file ({found.description}): the keyed state of {ops} "
        f"will be lost if Redis restarts; to keep it, {FIX}"
    )


def check_keyed_state(r: Any, stateful: list[str], require: bool) -> Durability | None:
    """At start, for a topology with keyed operators (``stateful``): one line saying how
    Redis keeps their state; not durable (or unknown) is a warning, or with ``require``
    a ``NotDurableError``. None: no keyed operator, nothing asked."""
    if not stateful:
        return None
    found = redis_durability(r)
    if found.durable:
        log.info("keyed state of %s: Redis keeps an %s", ", ".join(stateful), found.description)
        return found
    said = _warning(found, stateful)
    if require:
        raise NotDurableError(f"{said}. SPS_REQUIRE_DURABLE_STATE is set: not starting")
    log.warning("%s (SPS_REQUIRE_DURABLE_STATE=true refuses to start instead)", said)
    return found


def lost_state(operator: str, lost: Mapping[int, int]) -> StateLostError:
    """The error for keyed partitions (partition -> Spark's start offset) that Spark has
    moved past 0 but whose commit is not in Redis: Redis lost their state."""
    where = ", ".join(f"partition {p} (Spark at offset {s})" for p, s in sorted(lost.items()))
    fields = " ".join(f"{p} {s}" for p, s in sorted(lost.items()))
    committed = Keys("<SPS_KEY_PREFIX>").committed(operator)
    return StateLostError(
        f"keyed operator {operator}: {where}: no committed offset in Redis. Redis lost the "
        "keyed state and its committed offsets (restarted without an append-only file, or "
        "flushed); not serving it with empty state. To recover: restore Redis's data and "
        "restart the dataplane; or accept empty state from Spark's offsets with "
        f"`HSET {committed} {fields}`; or remove the "
        "dataplane's checkpoint (SPS_CHECKPOINT_DIR) to replay every operator's topic from "
        f"its start. Then, to keep state across restarts, {FIX}."
    )
