"""A job's log records in the worker: the fields every record of a job carries (the JSON
log format shows them; never the payload), and the record of how a job ended."""

from __future__ import annotations

import logging
from typing import Any

from durq.models import Job
from durq.worker.capacity import Delivery
from durq.worker.executor import Outcome

__all__ = ["job_fields", "log_outcome", "task_name"]

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


def log_outcome(job: Job, name: str, outcome: Outcome, seconds: float) -> None:
    """Log how ``job`` (of task ``name``) ended: a cancel, a retry or a dead letter
    always; a success only at DEBUG."""
    if outcome.kind == "cancelled":
        log.info("job %s (%s) cancelled", job.id, name, extra=job_fields(job, name, outcome))
    elif outcome.kind == "hold":  # a deploy under way: another worker runs it
        log.info("job %s %s", job.id, outcome.summary, extra=job_fields(job, name, outcome))
    elif outcome.kind in ("retry", "dead"):
        if outcome.kind == "dead":
            log.error(
                "job %s (%s, attempt %d/%d) dead-lettered: %s",
                job.id,
                name,
                job.attempt,
                job.max_attempts,
                outcome.summary,
                extra=job_fields(job, name, outcome),
            )
        else:
            log.warning(
                "job %s (%s, attempt %d/%d) failed: %s; retry in %.1fs",
                job.id,
                name,
                job.attempt,
                job.max_attempts,
                outcome.summary,
                outcome.delay,
                extra=job_fields(job, name, outcome),
            )
    elif log.isEnabledFor(logging.DEBUG):
        log.debug(
            "job %s %s in %.4fs",
            job.id,
            outcome.kind,
            seconds,
            extra=job_fields(job, name, outcome),
        )
