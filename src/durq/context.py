"""The job being run, for code inside a task: ``durq.current_job()``.

The worker sets it in the asyncio task that runs the job; the thread runner copies the
context into the thread of a sync task, so it is the job's own there too.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar, Token

from durq.models import Job

__all__ = ["JobLogContext", "current_job", "set_current_job"]

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


class JobLogContext(logging.Filter):
    """A log filter (a worker's handler has it) that attaches the running job to each
    record made inside a task: the ``job_id``, ``task``, ``queue`` and ``attempt``
    fields (the JSON format shows them) and, for a record of the task's own logger, a
    ``durq_job`` suffix for the text format. Records of other contexts pass unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        job = _current.get()
        if job is None or record.__dict__.get("job_id") is not None:
            return True  # outside a job, or a durq record that names its job itself
        task = job.task or "?"
        record.job_id, record.task, record.queue = job.id, task, job.queue
        record.attempt = job.attempt
        if not record.name.startswith("durq"):
            record.durq_job = (
                f" [{task} job {job.id} queue {job.queue} attempt {job.attempt}/{job.max_attempts}]"
            )
        return True
