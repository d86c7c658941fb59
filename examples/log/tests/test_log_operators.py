"""The log example's operators on their own: no broker, no Spark."""

import pytest
import redis
from sps_log.operators import generate, parse, template

from elastic_sps.api import run_local
from elastic_sps.io.embedded import redis_server
from elastic_sps.io.envelope import BadEvent

pytestmark = pytest.mark.unit


def test_a_line_is_parsed_and_templated():
    line = "2026-11-25 10:00:01 ERROR [db] timeout after 3000 ms on 0x1f"
    [(_, parsed)] = parse(line, None)
    assert parsed["level"] == "ERROR"
    [(_, templated)] = template(parsed, None)
    assert templated["template"] == "timeout after <*> ms on <*>"


def test_the_pipeline_counts_lines_by_level_in_a_real_redis():
    lines = [
        "2026-11-25 10:00:01 ERROR [db] timeout after 3000 ms on 0x1f",
        "2026-11-25 10:00:02 INFO [web] served /index in 12 ms",
        "2026-11-25 10:00:03 ERROR [db] timeout after 10 ms on 0x2a",
        "not a log line",
    ]
    with redis_server() as url:
        run = run_local("log", lines, redis=url, prefix="t")
        counts = redis.Redis.from_url(url).hgetall("t:app:log:levels")
    assert counts == {b"ERROR": b"2", b"INFO": b"1"}
    [letter] = run.dead_letters
    assert (letter.operator, letter.event_id) == ("parse", "local/3")


def test_a_line_of_another_shape_is_bad_input():
    with pytest.raises(BadEvent):
        parse("not a log line", None)


def test_the_generator_is_deterministic_for_a_seed():
    assert list(generate(5, seed=3)) == list(generate(5, seed=3))
    assert all(parse(line, None) for line in generate(20, seed=1))
