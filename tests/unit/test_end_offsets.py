"""``end_offsets`` asks again for a partition whose leader is being elected (a topic just
made), and raises what is not retriable."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from elastic_sps.io.kafka_io import end_offsets

pytestmark = pytest.mark.unit


class _Admin:
    """Answers ListOffsets from a script: per call, partition -> offset or error code."""

    def __init__(self, answers: list[dict[int, Any]]) -> None:
        self.answers, self.asked = answers, []

    def list_offsets(self, wanted: dict[Any, Any], request_timeout: float) -> dict[Any, Future]:
        script = self.answers.pop(0)
        self.asked.append(sorted(tp.partition for tp in wanted))
        out = {}
        for tp in wanted:
            fut: Future = Future()
            got = script[tp.partition]
            if isinstance(got, KafkaError):
                fut.set_exception(KafkaException(got))
            else:
                fut.set_result(SimpleNamespace(offset=got))
            out[tp] = fut
        return out


def test_a_partition_without_a_leader_yet_is_asked_again():
    electing = KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)
    admin = _Admin([{0: 3, 1: electing}, {1: 2}])
    assert end_offsets(admin, {"t": 2}) == {"t": [3, 2]}
    assert admin.asked == [[0, 1], [1]]


def test_an_error_that_is_not_an_election_is_raised():
    admin = _Admin([{0: KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)}])
    with pytest.raises(KafkaException):
        end_offsets(admin, {"t": 1})
