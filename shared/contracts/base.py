"""The envelope every record shares: a schema name and a version, then its own fields."""

from __future__ import annotations

import json
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError


class ContractError(ValueError):
    """A record that does not parse or does not match its schema."""


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    schema_name: str
    version: int = 1


R = TypeVar("R", bound=Record)


def encode(record: Record) -> bytes:
    return record.model_dump_json().encode()


def decode(raw: bytes | str | None, model: type[R]) -> R:
    if raw is None:
        raise ContractError("empty record (no value)")
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ContractError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ContractError(f"a record is a JSON object, got {type(doc).__name__}")
    want = model.model_fields["schema_name"].default
    if doc.get("schema_name") != want:
        raise ContractError(f"schema_name {doc.get('schema_name')!r}, expected {want!r}")
    supported = model.model_fields["version"].default
    if doc.get("version", 1) != supported:
        raise ContractError(
            f"{want} version {doc.get('version')!r} unsupported (reads {supported})"
        )
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ContractError(f"{want}: field {where!r}: {first['msg']}") from None
