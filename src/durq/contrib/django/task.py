"""DurqTask: Django's Task with durq's per-job options, and enqueue on commit.

``@task`` builds one of these when the backend is durq's (``DurqBackend.task_class``):

    @task(priority=50, max_attempts=3)           # Django 6.1 and django-tasks pass
    def send_receipt(order_id: int) -> None: ... # extra decorator arguments through

    send_receipt.using(group=f"shop-{shop_id}").enqueue(order.id)
    send_receipt.enqueue_on_commit(order.id)     # inside transaction.atomic()
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from durq.contrib.django.compat import Task

__all__ = ["DurqTask"]

_DURQ_FIELDS = ("group", "key", "max_attempts", "expires")


@dataclass(frozen=True, slots=True, kw_only=True)
class DurqTask(Task):  # Task: from whichever Django is installed
    """A Django task run by durq, with durq's per-job options.

    Attributes:
        group: the group (tenant) its jobs belong to; durq serves groups in turn, so one
            tenant's flood does not starve the others.
        key: a dedup key: while a job holding it has not started, enqueueing another
            returns the pending job's result instead of adding a job.
        max_attempts: attempts before the job ends FAILED (default: the backend's
            ``max_attempts`` option). An exception, or a worker lost mid-run, costs an
            attempt; a retried job is READY again, with the error in ``errors``.
        expires: seconds after its enqueue by which the job must have started: a job
            not started by then (its retries included) is never run and ends FAILED
            (durq's expiry, docs/job-control.md).
    """

    group: str | None = None
    key: str | None = None
    max_attempts: int | None = None
    expires: float | None = None

    def using(self, **changes: Any) -> Any:
        """A copy with other defaults: Django's (``priority``, ``queue_name``,
        ``run_after``, ``backend``) and durq's (``group``, ``key``, ``max_attempts``,
        ``expires``)."""
        durq_changes = {name: changes.pop(name) for name in _DURQ_FIELDS if name in changes}
        task = Task.using(self, **changes)
        return replace(task, **durq_changes) if durq_changes else task

    def enqueue_on_commit(self, *args: Any, **kwargs: Any) -> Any:
        """Enqueue once the current transaction of the default database commits; nothing
        is enqueued if it rolls back.

        Returns at once a READY ``TaskResult`` whose id is the job's: the arguments are
        checked now, the job id is chosen now, and the commit hook enqueues with that id,
        so a hook run twice still adds one job. Outside a transaction the job is
        enqueued at once. Until the commit, ``get_result`` raises
        ``TaskResultDoesNotExist``.
        """
        return self.get_backend().enqueue_on_commit(self, args, kwargs)
