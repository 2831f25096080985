"""The worker runtime: fetch, run, acknowledge, extend leases, drain on signals."""

from durq.worker.config import WorkerConfig
from durq.worker.runner import Worker, WorkerState

__all__ = ["Worker", "WorkerConfig", "WorkerState"]
