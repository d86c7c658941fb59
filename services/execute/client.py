"""The execute service's client: on-demand rescale requests on the requests topic
(the CLI's ``rescale``, the tests' and benchmarks' mid-stream resizes)."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer

from elastic_sps.contracts.base import encode
from elastic_sps.contracts.plan import RescaleRequest
from elastic_sps.io.connections import kafka_config
from elastic_sps.settings import ServiceSettings


def send_rescale(
    bootstrap: str,
    operator: str | None,
    replicas: int | None = None,
    add: int | None = None,
    remove: int | None = None,
    input_eps: float | None = None,
) -> RescaleRequest:
    """Publish a request; an error if Kafka did not take it within 10 s."""
    req = RescaleRequest(
        request_id=uuid.uuid4().hex,
        operator=operator,
        replicas=replicas,
        add=add,
        remove=remove,
        input_eps=input_eps,
    )
    producer = Producer(kafka_config(bootstrap))
    producer.produce(ServiceSettings().topics.requests, key=req.request_id, value=encode(req))
    if producer.flush(10) != 0:
        raise ValueError("the request was not delivered to Kafka within 10 s")
    return req
