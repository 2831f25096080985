"""The worker runtime: fetch, run, acknowledge, extend leases, drain on signals.

``Worker`` and its state are imported on first use: the admin commands read the
registry (``durq.worker.registry``) without loading the worker's runtime.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from durq.worker.config import WorkerConfig
    from durq.worker.runner import Worker, WorkerState

__all__ = ["Worker", "WorkerConfig", "WorkerState"]

_EXPORTS = {
    "Worker": "durq.worker.runner",
    "WorkerState": "durq.worker.runner",
    "WorkerConfig": "durq.worker.config",
}


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'durq.worker' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
