"""A partition's watermark and its inputs' declarations as Redis keeps them.

One hash per partition (``Keys.watermarks``): ``@`` the partition's own watermark, an
input's name its watermark, the name + ``#`` its status ``"idle of"``. Watermarks are
written with a max-merge inside Redis, so an attempt that read an older one (a retry)
never moves one back.
"""

from __future__ import annotations

from typing import Any

from elastic_sps.io.watermarks import InputMark

WATERMARK_FIELD = "@"

# A stateless partition's marks (its offsets are plain counters): (op, field, value)
# triples, S: set, M: set if the number is above the field's.
MERGE_MARKS = """
for i = 1, #ARGV, 3 do
  local op, a, b = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if op == 'S' then redis.call('HSET', KEYS[1], a, b)
  else
    local cur = redis.call('HGET', KEYS[1], a)
    if (not cur) or tonumber(b) > tonumber(cur) then redis.call('HSET', KEYS[1], a, b) end
  end
end
return 1
"""


def text(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def read_marks(raw: dict[Any, Any]) -> tuple[float | None, dict[str, InputMark]]:
    """A partition's watermark and its inputs' marks, from its hash."""
    fields = {text(k): text(v) for k, v in raw.items()}
    marks = {}
    for name, value in fields.items():
        if name == WATERMARK_FIELD or name.endswith("#"):
            continue
        idle, of = fields.get(name + "#", "0 1").split()
        marks[name] = InputMark(float(value), idle == "1", int(of))
    for name, value in fields.items():  # a status declared before any watermark
        if name.endswith("#") and name[:-1] not in marks:
            idle, of = value.split()
            marks[name[:-1]] = InputMark(None, idle == "1", int(of))
    wm = fields.get(WATERMARK_FIELD)
    return (float(wm) if wm else None), marks


def marks_args(
    watermark: float | None, marks: dict[str, InputMark], names: set[str]
) -> list[tuple[str, str, str]]:
    """(op, field, value) writing the partition's watermark and ``names``' marks."""
    out: list[tuple[str, str, str]] = []
    if watermark is not None:
        out.append(("M", WATERMARK_FIELD, repr(float(watermark))))
    for name in sorted(names):
        m = marks[name]
        if m.wm is not None:
            out.append(("M", name, repr(float(m.wm))))
        out.append(("S", name + "#", f"{int(m.idle)} {m.of}"))
    return out


def merge_marks(redis: Any, pipe: Any, key: str, args: list[tuple[str, str, str]]) -> None:
    """Queue a stateless partition's marks on ``pipe`` (executed by the caller)."""
    if args:
        script = redis.register_script(MERGE_MARKS)
        script(keys=[key], args=[x for triple in args for x in triple], client=pipe)
