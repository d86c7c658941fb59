"""A topology's YAML document as a pydantic model: the shape every document is checked
against before ``elastic_sps.model.topology`` builds it (types, unknown keys), and the JSON
Schema ``elastic-sps schema`` prints for editors. What a shape cannot say (names that
exist, no cycle, bounds in order) stays in ``topology_checks``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from elastic_sps.model.topology_checks import TopologyError

_STRICT = ConfigDict(extra="forbid", allow_inf_nan=False)


class WindowDoc(BaseModel):
    """Exactly one of ``tumbling_s``, ``hopping_s`` (with ``slide_s``), ``session_gap_s``."""

    model_config = _STRICT
    tumbling_s: float | None = Field(None, gt=0, description="tumbling windows of this length")
    hopping_s: float | None = Field(None, gt=0, description="hopping windows of this length")
    slide_s: float | None = Field(None, gt=0, description="how far hopping windows start apart")
    session_gap_s: float | None = Field(None, gt=0, description="a session ends after this gap")
    lateness_s: float = Field(0.0, ge=0, description="how long a window waits past its end")


class OperatorDoc(BaseModel):
    model_config = _STRICT
    name: str = Field(min_length=1, description="unique; 'source' is reserved")
    code: str = Field("", description="'package.module:callable' (empty: pass events on)")
    et_ms: float | None = Field(
        None, gt=0, description="execution time per event (left out: measured at start)"
    )
    cpu_share: float | None = Field(None, ge=0, le=1, description="share of et_ms on a CPU")
    min_replicas: int = Field(1, ge=0)
    max_replicas: int = Field(8, ge=1)
    output: str = Field("", description="a sink's output topic")
    on_error: Literal["dead-letter", "fail"] = Field(
        "dead-letter", description="what a replica does with an event its code raised on"
    )
    chain: bool = Field(True, description="false: never fused into a chain")
    key: str = Field("", description="'field:<path>': the key of a keyed operator's state")
    key_groups: int | None = Field(None, ge=1, description="a keyed operator's most parallelism")
    window: WindowDoc | None = Field(None, description="an event-time window operator's")
    state_ttl_s: float | None = Field(
        None,
        gt=0,
        description="a keyed operator's: a key's state expires after this much "
        "event time without an event for the key",
    )


class EdgeDoc(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, populate_by_name=True)
    src: str = Field(alias="from", description="'source' or an operator")
    dst: str = Field(alias="to")
    fraction: float = Field(1.0, ge=0, description="events sent per event in")


class SourceDoc(BaseModel):
    model_config = _STRICT
    topics: str | list[str] | None = Field(None, description="Kafka topics read (default: ours)")
    topic: str | None = Field(None, description="one topic (same as topics)")
    format: Literal["json", "text", "bytes"] = "json"
    id: str = Field("offset", description="'offset' or 'field:<path>'")
    time: str = Field("timestamp", description="'timestamp' or 'field:<path>' (epoch s or ms)")
    key: str = ""
    sample_events: str = Field("", description="JSON lines of payloads, to try the pipeline")
    generator: str = Field("", description="'pkg.mod:fn' making sample payloads (n, seed)")


class TopologyDoc(BaseModel):
    model_config = _STRICT
    name: str | None = Field(None, description="default: the file's name")
    description: str = ""
    chain: bool = Field(
        True, description="fuse linear runs of operators (Flink's chaining); false: none"
    )
    operators: list[OperatorDoc] = Field(min_length=1)
    edges: list[EdgeDoc] = Field(default_factory=list)
    source: SourceDoc | None = None


def json_schema() -> dict[str, Any]:
    """The document's JSON Schema (``elastic-sps schema``)."""
    schema = TopologyDoc.model_json_schema(by_alias=True)
    schema["title"] = "elastic-sps topology"
    return schema


def check_shape(doc: Any, origin: str) -> None:
    """Raise ``TopologyError``, one line, for the first thing ``doc``'s shape gets wrong."""
    if not isinstance(doc, Mapping):
        raise TopologyError(f"{origin}: a topology is a mapping with 'operators' and 'edges'")
    try:
        TopologyDoc.model_validate(doc)
    except ValidationError as exc:
        raise TopologyError(f"{origin}: {_first_error(exc, doc)}") from None


def _first_error(exc: ValidationError, doc: Mapping[str, Any]) -> str:
    err = exc.errors()[0]
    loc = list(err["loc"])
    where = _where(loc, doc)
    field = ".".join(str(p) for p in loc)
    if err["type"] == "extra_forbidden":
        return f"{where}unknown keys [{str(loc[-1])!r}]"
    got = err.get("input")
    shown = "" if isinstance(got, Mapping | list) or got is None else f", got {got!r}"
    return f"{where}{field or 'document'}: {err['msg'].lower()}{shown}"


def _where(loc: list[Any], doc: Mapping[str, Any]) -> str:
    """'operator 'x': ' or 'edge a -> b: ' for an error inside one (``loc`` trimmed)."""
    if len(loc) >= 2 and loc[0] in ("operators", "edges") and isinstance(loc[1], int):
        kind, k = loc[0], loc[1]
        del loc[:2]
        item = doc[kind][k] if isinstance(doc.get(kind), list) else None
        if not isinstance(item, Mapping):
            return f"{kind}[{k}]: "
        if kind == "operators":
            return f"operator {item.get('name')!r}: " if "name" in item else f"operators[{k}]: "
        return f"edge {item.get('from')} -> {item.get('to')}: "
    return ""
