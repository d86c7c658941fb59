"""A user's project written at test time, outside the repository: a package of two
operators (a function that raises on `bad` readings, and a class with open/process),
sample readings, and a topology naming them."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

OPERATORS = '''
class Offset:
    """A class operator: open() once per worker."""

    def open(self, ctx):
        self.offset = 1000

    def process(self, payload, ctx):
        return [(None, {"n": payload["n"], "v": payload["sq"] + self.offset})]


def square(payload, ctx):
    if payload.get("bad"):
        raise ValueError(f"bad reading {payload['n']}")
    return [(None, {"n": payload["n"], "sq": payload["n"] ** 2})]
'''


def expected_value(payload: dict) -> int | None:
    """What the pipeline outputs for one payload, computed independently of it."""
    return None if payload.get("bad") else payload["n"] ** 2 + 1000


def write_package(root: Path) -> None:
    """``root/userpipe`` (importable with ``root`` on the path) and a pyproject.toml."""
    (root / "userpipe").mkdir(parents=True)
    (root / "userpipe" / "__init__.py").write_text("")
    (root / "userpipe" / "ops.py").write_text(textwrap.dedent(OPERATORS))
    (root / "pyproject.toml").write_text(
        '[project]\nname = "userpipe"\nversion = "1"\n[tool.setuptools]\npackages = ["userpipe"]\n'
    )


def write_readings(path: Path, n: int, bad_every: int = 0) -> list[dict]:
    def bad(k: int) -> bool:
        return bool(bad_every) and k % bad_every == bad_every - 1

    rows = [{"n": k, "sensor": f"s{k % 7}", **({"bad": 1} if bad(k) else {})} for k in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows
