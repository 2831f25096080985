"""A job's log records in the worker: the fields every record of a job carries (the JSON
log format shows them; never the payload), and the record of how a job ended."""

from __future__ import annotations

import logging
from typing import Any

from durq.models import Job
from durq.worker.capacity import Delivery
from durq.worker.executor import Outcome

__all__ = ["job_fields", "log_outcome", "log_start", "task_name"]

log = logging.getLogger("durq.worker")


def task_name(delivery: Delivery) -> str:
    """The name of the task of ``delivery``'s job ("?" when the app has no such task)."""
    return delivery.task.name if delivery.task else "?"


def job_fields(job: Job, task: str, outcome: Outcome | None) -> dict[str, Any]:
    """The fields of a job's log records (the JSON log format shows them); never its
    payload. A failed attempt's traceback rides along (``durq_traceback``): the text
    format prints it under the line, the JSON format as ``exception``."""
    return {
        "job_id": job.id,
        "task": task,
        "queue": job.queue,
        "attempt": job.attempt,
        "outcome": None if outcome is None else outcome.kind,
        "durq_traceback": None if outcome is None else outcome.trace or None,
    }


def log_start(job: Job, name: str) -> None:
    """Log (at DEBUG) that ``job`` of task ``name`` starts."""
    log.debug(
        "job %s (%s) of %s started, attempt %d/%d",
        job.id,
        name,
        job.queue,
        job.attempt,
        job.max_attempts,
        extra=job_fields(job, name, None),
    )


def log_outcome(job: Job, name: str, outcome: Outcome, seconds: float) -> None:
    """Log how ``job`` (of task ``name``) ended: a cancel, a retry or a dead letter
    always; a success only at DEBUG. Every line names the job, its task and its queue
    (``durq job show ID`` finds the queue itself, but a line read alone should say it)."""
    kind = outcome.kind
    fields = job_fields(job, name, outcome)
    if kind == "cancelled":
        log.info("job %s (%s) of %s cancelled", job.id, name, job.queue, extra=fields)
    elif kind == "hold":  # a deploy under way: another worker runs it
        log.info("job %s (%s) of %s %s", job.id, name, job.queue, outcome.summary, extra=fields)
    elif kind in ("retry", "dead"):
        dead = kind == "dead"
        log.log(
            logging.ERROR if dead else logging.WARNING,
            "job %s (%s) of %s %s at attempt %d/%d: %s%s",
            job.id,
            name,
            job.queue,
            "dead-lettered" if dead else "failed",
            job.attempt,
            job.max_attempts,
            outcome.summary,
            "" if dead else f"; retry in {outcome.delay:.1f}s",
            extra=fields,
        )
    elif log.isEnabledFor(logging.DEBUG):
        log.debug(
            "job %s (%s) of %s %s in %.4fs",
            job.id,
            name,
            job.queue,
            kind,
            seconds,
            extra=fields,
        )
