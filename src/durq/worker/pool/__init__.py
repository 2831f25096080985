"""The process pool: sync tasks in child processes forked from a template, with hard
time limits, recycling and no orphans (docs/process-pool.md).

    config    ProcessPoolConfig: kill grace and recycling limits
    errors    PoolBroken
    pool      ProcessPool, in the worker: children, dispatch, time limits, deaths
    template  the template process, which forks, signals and reaps the children
    child     a child's loop: one job at a time, its flags, TimeLimitExceeded
    wire      the messages between the worker and a child
    reasons   why a child died, for its job's dead letter; the cgroup's OOM kills
    rss       resident memory of a process
    metrics   kills by reason, recycles by cause, children alive
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from durq.worker.pool.config import DEFAULT_KILL_GRACE, ProcessPoolConfig
from durq.worker.pool.errors import PoolBroken

if TYPE_CHECKING:
    from durq.app.app import App
    from durq.app.task import Task
    from durq.metrics import WorkerMetrics
    from durq.worker.pool.pool import ProcessPool

__all__ = [
    "DEFAULT_KILL_GRACE",
    "PoolBroken",
    "ProcessPoolConfig",
    "cpus",
    "needs_pool",
    "start_pool",
]


def cpus() -> int:
    """The CPUs this process may run on: the process pool's default size."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def needs_pool(default: str, tasks: Iterable[Task[Any, Any]]) -> bool:
    """True when some sync task of ``tasks`` runs in a process pool (``default``: the
    worker's pool for tasks that name none)."""
    return any(not t.is_async and (t.config.pool or default) == "process" for t in tasks)


def start_pool(
    app: App, default: str, size: int, config: ProcessPoolConfig, metrics: WorkerMetrics
) -> ProcessPool | None:
    """The process pool of a worker of ``app``, its template forked now; None when no
    task of ``app`` runs in one. ``size``: its children."""
    if not needs_pool(default, app.tasks.values()):
        return None
    # imported here: a worker without a task in the pool never loads its code
    from durq.worker.pool.pool import ProcessPool

    return ProcessPool(app, size, config, default=default == "process", metrics=metrics)
