"""One operator of a topology: its declared fields, and its YAML document both ways."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from elastic_sps.model.keyed import DEFAULT_KEY_GROUPS
from elastic_sps.model.records import Paths
from elastic_sps.model.records import paths as key_paths
from elastic_sps.model.topology_checks import TopologyError
from elastic_sps.model.windows import WindowSpec

OPERATOR_KEYS = {
    "name",
    "et_ms",
    "min_replicas",
    "max_replicas",
    "code",
    "output",
    "on_error",
    "cpu_share",
    "chain",
    "key",
    "window",
    "key_groups",
    "state_ttl_s",
}


CPU_BOUND_SHARE = 0.5


@dataclass(frozen=True)
class Operator:
    """``et_ms``: the execution time per event; None until measured (``elastic-sps
    benchmark``, or the dataplane at start). ``cpu_share``: the share of that time spent
    on a CPU (measured; None: unknown, treated as waiting work). ``code``: the user's
    ``package.module:callable`` (empty: pass events on). ``output``: the topic a sink's
    outputs go to. ``on_error``: ``dead-letter`` or ``fail`` (elastic_sps.pipeline.failures).
    ``chain``: False keeps it out of a chain (``chained``). ``members``: the declared
    operators a chained operator runs in turn (empty for a declared one). ``key``: a
    keyed operator's ``field:<path>`` (``elastic_sps.model.keyed``), with ``key_groups`` its
    most parallelism; ``window``: an event-time window operator's (``windows``).
    ``state_ttl_s``: a keyed operator's key state expires once the watermark passes its
    last event's time plus this (event time: ``run_local`` and the dataplane agree)."""

    name: str
    et_ms: float | None
    min_replicas: int = 1
    max_replicas: int = 8
    code: str = ""
    output: str = ""
    on_error: str = "dead-letter"
    cpu_share: float | None = None
    chain: bool = True
    members: tuple[Operator, ...] = ()
    key: str = ""
    window: WindowSpec | None = None
    key_groups: int = DEFAULT_KEY_GROUPS
    state_ttl_s: float | None = None

    @property
    def stateful(self) -> bool:
        """Keyed or windowed: its events go to the replica owning their key."""
        return bool(self.key) or self.window is not None

    @property
    def keyed_members(self) -> tuple[Operator, ...]:
        """A keyed chain's keyed members after its head (``topology.same_key``)."""
        return tuple(m for m in self.members[1:] if m.key)

    @property
    def key_path(self) -> Paths:
        """The key's dotted paths (``field:a.b|c.d``: the first the payload has)."""
        return key_paths(self.key)

    @property
    def et_s(self) -> float:
        if self.et_ms is None:
            raise TopologyError(
                f"operator {self.name!r} has no et_ms yet: measure it with `elastic-sps "
                "benchmark`, or let the dataplane measure it at start"
            )
        return self.et_ms / 1000.0

    @property
    def cpu_bound(self) -> bool:
        return self.cpu_share is not None and self.cpu_share >= CPU_BOUND_SHARE


def operator_dict(o: Operator) -> dict[str, Any]:
    out: dict[str, Any] = {"name": o.name}
    if o.et_ms is not None:
        out["et_ms"] = o.et_ms
    out["min_replicas"], out["max_replicas"] = o.min_replicas, o.max_replicas
    for k, default in (("code", ""), ("output", ""), ("on_error", "dead-letter")):
        if getattr(o, k) != default:
            out[k] = getattr(o, k)
    if o.cpu_share is not None:
        out["cpu_share"] = o.cpu_share
    if not o.chain:
        out["chain"] = False
    if o.key:
        out["key"], out["key_groups"] = o.key, o.key_groups
    if o.window is not None:
        out["window"] = o.window.to_dict()
    if o.state_ttl_s is not None:
        out["state_ttl_s"] = o.state_ttl_s
    return out


def operator_from_doc(od: Mapping[str, Any], where: str) -> Operator:
    key = str(od.get("key", ""))
    if key and not (key.startswith("field:") and len(key) > len("field:")):
        raise TopologyError(f"{where}: key must be 'field:<path>', got {key!r}")
    window = WindowSpec.parse(od["window"]) if od.get("window") is not None else None
    pool = (int(od.get("min_replicas", 1)), int(od.get("max_replicas", 8)))
    if window is not None and not key:  # a window over all events: one replica holds it
        pool = (1, 1)
    return Operator(
        name=str(od["name"]),
        et_ms=float(od["et_ms"]) if od.get("et_ms") is not None else None,
        min_replicas=pool[0],
        max_replicas=pool[1],
        code=str(od.get("code", "")),
        output=str(od.get("output", "")),
        on_error=str(od.get("on_error", "dead-letter")),
        cpu_share=float(od["cpu_share"]) if od.get("cpu_share") is not None else None,
        chain=flag(od.get("chain", True), f"{where}: chain"),
        key=key,
        window=window,
        key_groups=int(od.get("key_groups", max(DEFAULT_KEY_GROUPS, pool[1]))),
        state_ttl_s=float(od["state_ttl_s"]) if od.get("state_ttl_s") is not None else None,
    )


def flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise TopologyError(f"{where} must be true or false, got {value!r}")
    return value
