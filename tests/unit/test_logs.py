"""SPS_LOG_FORMAT=json: one JSON object a log line."""

from __future__ import annotations

import json
import logging

import pytest

from elastic_sps.logs import JsonFormatter

pytestmark = pytest.mark.unit


def test_a_record_is_one_json_line_with_its_exception():
    try:
        raise KeyError("k")
    except KeyError:
        import sys

        record = logging.LogRecord(
            "sps.plan", logging.ERROR, "f.py", 3, "no %s", ("key",), sys.exc_info()
        )
    line = JsonFormatter("plan").format(record)
    doc = json.loads(line)
    assert "\n" not in line
    assert (doc["service"], doc["level"], doc["logger"], doc["message"]) == (
        "plan",
        "ERROR",
        "sps.plan",
        "no key",
    )
    assert doc["exception"].endswith("KeyError: 'k'")
