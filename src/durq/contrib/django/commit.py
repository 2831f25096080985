"""Enqueue a durq task once the database transaction commits.

For Django tasks, use ``task.enqueue_on_commit(...)`` (``DurqTask``). This function does
the same for durq's own tasks (``@app.task``) in a Django project:

    with transaction.atomic():
        order = Order.objects.create(...)
        job_id = enqueue_on_commit(send_receipt, order.id)
"""

from __future__ import annotations

import secrets
from typing import Any

from django.db import transaction

__all__ = ["enqueue_on_commit"]


def enqueue_on_commit(task: Any, *args: Any, **kwargs: Any) -> str:
    """Enqueue ``task(*args, **kwargs)`` when the transaction of the default database
    commits (at once outside a transaction); nothing is enqueued on a rollback.

    ``task`` is a durq ``Task``, or ``task.options(...)`` for per-job options. Returns
    the job id, chosen now unless ``options(id=...)`` gave one: the arguments are
    checked now, and the commit hook enqueues with that id, so a hook that runs twice
    adds one job.
    """
    call = task.call(*args, **kwargs)
    if call.options.id is None:
        call = call.with_options(id=secrets.token_urlsafe(12))
    call.task.message(call)  # bad arguments fail here, in the request, not after the commit
    app = call.task.app
    transaction.on_commit(lambda: app.enqueue_calls([call]))
    job_id: str = call.options.id
    return job_id
