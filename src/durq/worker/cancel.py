"""Stopping the worker's own background tasks for sure."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["cancel_and_wait"]


async def cancel_and_wait(*tasks: asyncio.Task[Any]) -> None:
    """Cancel ``tasks`` and wait until every one has ended.

    One ``cancel()`` is not always enough: on Python 3.11, ``asyncio.wait_for`` (which
    redis-py wraps around every socket write) returns normally when the cancellation
    arrives just as the write completes, so the cancellation is lost and the task goes on,
    e.g. into a blocking wait of several seconds, or a loop that never ends. The tasks
    are therefore cancelled again until they are done.
    """
    pending = {t for t in tasks if not t.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=0.1)
    for task in tasks:
        if not task.cancelled():
            task.exception()  # retrieved, so asyncio does not warn; the tasks log their own
