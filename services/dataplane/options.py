"""Helpers for the data source's options, shared by the driver and the executors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def topology_options(spec: str) -> dict[str, str]:
    """A built-in topology travels by name; a topology file travels as its text, so an
    executor on another machine (or in another container) needs no copy of the file."""
    path = Path(spec)
    if path.suffix in {".yaml", ".yml", ".json"} or path.exists():
        from shared import topology

        topology.load(path)  # a bad file fails here, in the driver, with its own message
        return {"topology": str(path), "topology_doc": path.read_text()}
    return {"topology": spec}


def resolved_topology_options(topo: Any) -> dict[str, str]:
    """A topology as the driver resolved it (measured costs included), as its text."""
    return {"topology": topo.name, "topology_doc": yaml.safe_dump(topo.to_dict())}


def load_topology(o: dict[str, str]) -> Any:
    from shared import topology

    if o.get("topology_doc"):
        return topology.from_dict(yaml.safe_load(o["topology_doc"]), o["topology"])
    return topology.load(o["topology"])
