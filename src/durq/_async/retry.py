"""Retrying an idempotent call through connection errors.

This file is the source of truth; ``durq/_sync/retry.py`` is generated from it by
``scripts/unasync.py`` (CI fails when they drift).
"""

from __future__ import annotations

import time
from asyncio import sleep
from collections.abc import Awaitable, Callable
from typing import TypeVar

from redis.exceptions import ConnectionError, TimeoutError

from durq.errors import RedisUnavailable

__all__ = ["retrying"]

T = TypeVar("T")


async def retrying(call: Callable[[], Awaitable[T]], retry_for: float) -> T:
    """Run ``call`` until it succeeds, retrying connection errors and timeouts for up to
    ``retry_for`` seconds (pauses from 50 ms doubling to 1 s). Only for calls that are
    safe to repeat, such as enqueues with fixed ids. Gives up with RedisUnavailable."""
    give_up = time.monotonic() + retry_for
    pause = 0.05
    while True:
        try:
            return await call()
        except RedisUnavailable:
            raise
        except (ConnectionError, TimeoutError) as exc:
            if time.monotonic() + pause > give_up:
                raise RedisUnavailable.after(exc, retry_for) from exc
            await sleep(pause)
            pause = min(pause * 2, 1.0)
