"""Starting a coroutine at once, in the caller's turn of the event loop, rather than in
the loop's next turn as ``asyncio.create_task`` does (Python 3.12's ``eager_start``,
which 3.11 lacks). The worker starts the job of an idle worker's pickup so: the job's
first step (for a short task, the whole job) runs before the loop polls its sockets
again, which saves that turn and the task on the pickup path."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import sys
import types
from collections.abc import Coroutine, Generator
from typing import Any

__all__ = ["start_eagerly"]

log = logging.getLogger("durq.worker")


def start_eagerly(
    coro: Coroutine[Any, Any, Any], name: str | None = None
) -> asyncio.Task[Any] | None:
    """Run ``coro``'s first step now, in a copy of the current context (as a task would:
    the context variables it sets stay its own). Returns None when it finished in that
    step, else the task that runs the rest (same context). An exception it raises in
    that step is logged, as a task's would be, not raised here."""
    if sys.version_info >= (3, 12):
        # asyncio's own eager start (and 3.12+ Tasks take only true coroutines, not the
        # generator-based one below)
        task = asyncio.Task(coro, loop=asyncio.get_running_loop(), name=name, eager_start=True)
        if not task.done():
            return task
        if not task.cancelled() and task.exception() is not None:
            log.error("%s failed", name or "a coroutine", exc_info=task.exception())
        return None
    context = contextvars.copy_context()
    try:
        first = context.run(coro.send, None)
    except StopIteration:
        return None
    except Exception:
        log.exception("%s failed", name or "a coroutine")
        return None
    # a task runs in a copy of the context it is made in: of this one, with what the
    # first step set (create_task's own context argument is 3.11+)
    return context.run(asyncio.create_task, _resume(coro, first), name=name)


@types.coroutine
def _resume(coro: Coroutine[Any, Any, Any], first: Any) -> Generator[Any, Any, Any]:
    """Carry on ``coro``, whose first step yielded ``first``: what it yields goes to the
    task running this and what the task sends or throws (a cancel) goes back to it."""
    pending = first
    while True:
        try:
            sent = yield pending
        except BaseException as exc:
            try:
                pending = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
            continue
        try:
            pending = coro.send(sent)
        except StopIteration as stop:
            return stop.value
