"""Enqueue durq jobs when a SQLAlchemy session commits, and none when it rolls back.

    with Session(engine) as session:
        session.add(order)
        job_id = enqueue_on_commit(session, send_receipt, order_id)   # id known now
        session.commit()                                              # enqueued here

The arguments are checked at the call and the job id is chosen then, so the job can be
referred to (stored on the row, returned to a client) before it exists; the enqueue at
commit uses that id, so running it twice still adds one job. A rollback of the session's
transaction drops the pending calls. Calls made inside a savepoint that rolls back
still go out with the outer commit: make them after the savepoint.
"""

import secrets
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session, SessionTransaction

_PENDING = "durq_pending_calls"


def enqueue_on_commit(session: Session, task: Any, *args: Any, **kwargs: Any) -> str:
    """Enqueue ``task(*args, **kwargs)`` (a durq Task, or ``task.options(...)``) once
    ``session`` commits; returns the job id."""
    call = task.call(*args, **kwargs)
    if call.options.id is None:
        call = call.with_options(id=secrets.token_urlsafe(12))
    call.task.message(call)  # bad arguments fail now, not after the commit
    if _PENDING not in session.info:
        event.listen(session, "after_commit", _enqueue_pending)
        event.listen(session, "after_soft_rollback", _drop_pending)
    session.info.setdefault(_PENDING, []).append(call)
    job_id: str = call.options.id
    return job_id


def _enqueue_pending(session: Session) -> None:
    calls = session.info.pop(_PENDING, [])
    by_app: dict[int, list[Any]] = {}
    for call in calls:
        by_app.setdefault(id(call.task.app), []).append(call)
    for group in by_app.values():  # one round trip per app and queue
        group[0].task.app.enqueue_calls(group)


def _drop_pending(session: Session, previous: SessionTransaction) -> None:
    if previous.parent is None:  # the session's own transaction, not a savepoint
        session.info.pop(_PENDING, None)
