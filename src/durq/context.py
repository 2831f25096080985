"""The job being run, for code inside a task: ``durq.current_job()``.

The worker sets it in the asyncio task that runs the job; the thread runner copies the
context into the thread of a sync task, so it is the job's own there too.
"""

from __future__ import annotations

from contextvars import ContextVar, Token

from durq.models import Job

__all__ = ["current_job", "set_current_job"]

_current: ContextVar[Job | None] = ContextVar("durq_current_job", default=None)


def current_job() -> Job | None:
    """The job being run, inside a task (None elsewhere): its ``id``, ``attempt``,
    ``max_attempts``, ``queue``, ``group`` and ``token``, e.g. to make side effects
    idempotent under at-least-once delivery; ``cancelled`` (a cancel was asked) and
    ``progress(fraction, info)`` (see docs/job-control.md); for a periodic job also
    ``schedule`` and ``scheduled_at`` (its tick time)."""
    return _current.get()


def set_current_job(job: Job | None) -> Token[Job | None]:
    """Make ``job`` the current job of this context (the worker, before running it)."""
    return _current.set(job)
