"""The log example's operators on their own: no broker, no Spark."""

from types import SimpleNamespace

import pytest
from sps_log.operators import count_level, generate, parse, store, template

from shared.io.envelope import BadEvent


class Writes:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, int]] = []

    def hincrby(self, key: str, field: str, n: int) -> None:
        self.calls.append((key, field, n))


def test_a_line_is_parsed_templated_and_counted_by_level():
    line = "2026-11-25 10:00:01 ERROR [db] timeout after 3000 ms on 0x1f"
    [(_, parsed)] = parse(line, None)
    assert parsed["level"] == "ERROR"
    [(_, templated)] = template(parsed, None)
    assert templated["template"] == "timeout after <*> ms on <*>"
    [(_, level)] = count_level(templated, None)
    writes = Writes()
    assert store(level, SimpleNamespace(writes=writes, prefix="t")) == []
    assert writes.calls == [("t:app:log:levels", "ERROR", 1)]


def test_a_line_of_another_shape_is_bad_input():
    with pytest.raises(BadEvent):
        parse("not a log line", None)


def test_the_generator_is_deterministic_for_a_seed():
    assert list(generate(5, seed=3)) == list(generate(5, seed=3))
    assert all(parse(line, None) for line in generate(20, seed=1))
