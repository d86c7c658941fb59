"""The knowledge base owns every Redis key: one default for a count, and no key string
spelled anywhere else in the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from elastic_sps.io.knowledge_base import Keys, active_count

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
# an f-string that begins with a placeholder and a ':' segment, the shape of every key
# ("{prefix}:op:...", "{keys.prefix}:dp:..."), or a literal of the default namespace
KEY_SHAPE = re.compile(r"""f["']\{[^}]*prefix[^}]*\}:|f["']\{tag\}:|["']sps:[a-z]""")


def test_an_unset_count_is_the_minimum_and_every_count_is_within_the_pool():
    assert active_count(None, 2, 8) == 2
    assert active_count(b"5", 1, 8) == 5
    assert active_count(b"12", 1, 8) == 8
    assert active_count(b"0", 0, 8) == 1


def test_keys_are_namespaced_by_the_prefix():
    k = Keys("run7")
    assert k.active("parse") == "run7:op:parse:active"
    assert k.ends("run7.op.parse") == "run7:ends:run7.op.parse"
    assert k.ids("sink", "processed") == "run7:ids:sink:processed"


def test_the_finder_sees_a_key_spelled_by_hand():
    assert KEY_SHAPE.search('r.get(f"{keys.prefix}:dp:runs")')
    assert KEY_SHAPE.search('r.get("sps:op:square:active")')
    assert not KEY_SHAPE.search('log.info(f"{name}: started")')


def test_no_redis_key_is_spelled_outside_the_knowledge_base():
    """Services, the library (but shared/io), benchmarks and tests go through ``Keys``."""
    found = []
    for folder in ("services", "shared", "benchmarks", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("shared/io/") or rel == "tests/unit/test_knowledge_base.py":
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if KEY_SHAPE.search(line):
                    found.append(f"{rel}:{n}: {line.strip()}")
    assert found == []
