"""Where LAS admits with ``admission: auto``: the entry step wherever the pipeline allows
it, the ingress elsewhere, with the reason (``elastic_sps.las.site``)."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_sps.las.site import auto_site, entry_pool, entry_step_refusal
from elastic_sps.model.topology import from_dict
from elastic_sps.settings import DataplaneSettings

pytestmark = pytest.mark.unit

OPS = "tests.support.engine_ops"


def topo(*ops: dict[str, Any], edges: list[tuple[str, str]], topics: int = 1) -> Any:
    source: dict[str, Any] = {"topics": [f"in{k}" for k in range(topics)]}
    return from_dict(
        {
            "name": "t",
            "chain": False,
            "source": source,
            "operators": list(ops),
            "edges": [{"from": a, "to": b} for a, b in edges],
        }
    )


def op(name: str, max_replicas: int = 4, **more: Any) -> dict[str, Any]:
    return {"name": name, "code": f"{OPS}:relabel", "max_replicas": max_replicas, **more}


STATELESS_ENTRY = topo(op("a"), op("b", key="field:k"), edges=[("source", "a"), ("a", "b")])


def test_a_stateless_entry_operator_with_a_partition_per_replica_admits_at_the_entry_step():
    site, why = auto_site(STATELESS_ENTRY, 30.0, 4)
    assert site == "entry"
    assert "4 partitions" in why
    assert auto_site(STATELESS_ENTRY, 30.0, 6)[0] == "entry"


def test_fewer_source_partitions_than_the_entry_pool_admit_at_the_ingress():
    site, why = auto_site(STATELESS_ENTRY, 30.0, 3)
    assert site == "ingress"
    assert "3 partitions" in why and "up to 4" in why


def test_a_pool_held_above_max_replicas_needs_its_own_partitions():
    # SPS_FIXED_REPLICAS=6 runs 6 entry replicas whatever max_replicas (4) says
    held = DataplaneSettings(fixed_replicas=6)
    assert entry_pool(held, STATELESS_ENTRY) == 6
    assert entry_pool(DataplaneSettings(), STATELESS_ENTRY) == 4
    site, why = auto_site(STATELESS_ENTRY, 30.0, 4, pool=6)
    assert site == "ingress" and "up to 6" in why


@pytest.mark.parametrize(
    ("t", "window_s", "named"),
    [
        (topo(op("a"), op("b"), edges=[("source", "a"), ("source", "b")]), 30.0, "one entry"),
        (topo(op("a", key="field:k"), edges=[("source", "a")]), 30.0, "stateless"),
        (topo(op("a"), edges=[("source", "a")], topics=2), 30.0, "one source topic"),
        (topo(op("a"), edges=[("source", "a")]), 0.0, "epochs"),
    ],
)
def test_what_the_entry_step_cannot_do_keeps_the_ingress(t: Any, window_s: float, named: str):
    refused = entry_step_refusal(t, window_s)
    assert refused is not None and named in refused
    site, why = auto_site(t, window_s, 8)
    assert (site, why) == ("ingress", refused)


def test_nothing_refuses_a_stateless_entry_operator_with_epochs():
    assert entry_step_refusal(STATELESS_ENTRY, 30.0) is None


def test_a_swapped_in_ingress_admits_under_auto():
    """``up --replace ingress=...``: the user's ingress is the one door; under ``auto``
    the entry step does not admit too (no broker is asked)."""
    from elastic_sps.services.ensemble.supervisor import _admission

    replace = {"ingress": ["python", "my_ingress.py"]}
    assert _admission({}, STATELESS_ENTRY, "127.0.0.1:1", replace) == "ingress"
    assert _admission({"SPS_ADMISSION": "auto"}, STATELESS_ENTRY, "127.0.0.1:1", replace) == (
        "ingress"
    )
