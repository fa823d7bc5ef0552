"""Hardware and model catalogs. Keys are lowercase; look-ups are case-insensitive.

Each catalog is a plain dict of records (see ``types``); every record names its source.
"""
from __future__ import annotations

from workbench.catalog.cpus import CPUS
from workbench.catalog.drives import DRIVES
from workbench.catalog.gpus import GPUS
from workbench.catalog.links import LINKS
from workbench.catalog.memory import HOST_MEMORY
from workbench.catalog.models import MODELS
from workbench.catalog.types import CPU, GPU, Drive, HostMemory, Link, ModelShape, MoE

CATALOGS: dict[str, dict] = {
    "gpu": GPUS,
    "link": LINKS,
    "cpu": CPUS,
    "memory": HOST_MEMORY,
    "drive": DRIVES,
    "model": MODELS,
}

__all__ = ["CATALOGS", "CPUS", "DRIVES", "GPUS", "LINKS", "HOST_MEMORY", "MODELS",
           "CPU", "GPU", "Drive", "HostMemory", "Link", "ModelShape", "MoE", "lookup"]


def lookup(kind: str, name: str):
    """Return the catalog record ``name`` of ``kind`` (case-insensitive), or raise KeyError
    whose message lists the allowed keys."""
    table = CATALOGS[kind]
    key = str(name).strip().lower()
    if key not in table:
        raise KeyError(f"unknown {kind} {name!r}; allowed: {', '.join(sorted(table))}")
    return table[key]
