"""Small topologies the tests share."""

from __future__ import annotations

from typing import Any

from elastic_sps.model.topology import from_dict


def one_operator(topic: str, replicas: int) -> Any:
    """One stateless operator ``a`` (up to ``replicas``) reading ``topic``: the entry
    step can admit for it when the topic has ``replicas`` partitions."""
    return from_dict(
        {
            "name": "t",
            "source": {"topics": [topic]},
            "operators": [
                {"name": "a", "code": "tests.support.engine_ops:relabel", "max_replicas": replicas}
            ],
            "edges": [{"from": "source", "to": "a"}],
        }
    )
