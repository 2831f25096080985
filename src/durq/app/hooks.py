"""Hooks: your code, run by the worker at its start and around each job, where Celery
has signals (``worker_process_init``, ``task_prerun``, ``task_success``,
``task_retry``, ``task_failure``): error reporting (Sentry), per-process set-up (a
database pool after ``-p`` forks), metrics of your own.

``@app.on("task_failure")`` registers a function for an event (see ``EVENTS``). Hooks
run in the worker's event loop, inside the job's context (``durq.current_job()`` is the
job), with no round trip to Redis; an ``async def`` hook is awaited. A hook that raises
is logged and changes nothing: the job's outcome is decided before its hooks run. A job
of the process pool runs its hooks in the child that runs it (``durq.worker.pool.child``),
and ``worker_start`` runs once in each child too.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from durq.errors import InvalidArgument

__all__ = ["EVENTS", "Hooks"]

log = logging.getLogger("durq.worker")

#: the events and what their hooks are called with
EVENTS: dict[str, str] = {
    "worker_start": "()",  # in each worker process, once Redis answers, before any job
    "task_start": "(job)",  # before the task's function runs
    "task_success": "(job, result)",  # it returned
    "task_retry": "(job, exc)",  # it failed and will run again
    "task_failure": "(job, exc)",  # it failed for good: the job is dead-lettered
}

F = TypeVar("F", bound=Callable[..., Any])


class Hooks:
    """An App's hooks by event (``App.on`` adds them; the worker runs them)."""

    def __init__(self) -> None:
        self.by_event: dict[str, list[Callable[..., Any]]] = {event: [] for event in EVENTS}
        #: any hook of a job's events: a worker without one skips them at no cost
        self.around_jobs = False

    def add(self, event: str, fn: F) -> F:
        """Register ``fn`` for ``event``; refused at once for an unknown event."""
        if event not in EVENTS:
            known = ", ".join(EVENTS)
            raise InvalidArgument(f"no hook event named {event!r} (the events: {known})")
        if not callable(fn):
            raise InvalidArgument(f"a hook must be callable, not {fn!r}")
        self.by_event[event].append(fn)
        self.around_jobs = any(self.by_event[e] for e in EVENTS if e != "worker_start")
        return fn

    async def run(self, event: str, *args: Any) -> None:
        """Call the hooks of ``event``, in the order they were registered; one that
        raises is logged and the others still run."""
        for fn in self.by_event[event]:
            try:
                done = fn(*args)
                if inspect.isawaitable(done):
                    await done
            except Exception:
                name = getattr(fn, "__qualname__", repr(fn))
                log.exception("%s hook %s raised (ignored)", event, name)
