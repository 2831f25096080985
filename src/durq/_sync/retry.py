"""Retrying an idempotent call through connection errors.

GENERATED from durq/_async/retry.py by scripts/unasync.py: edit that file.
"""

from __future__ import annotations

import time
from time import sleep
from collections.abc import Callable
from typing import TypeVar

from redis.exceptions import ConnectionError, TimeoutError

from durq.errors import RedisUnavailable

__all__ = ["retrying"]

T = TypeVar("T")


def retrying(call: Callable[[], T], retry_for: float) -> T:
    """Run ``call`` until it succeeds, retrying connection errors and timeouts for up to
    ``retry_for`` seconds (pauses from 50 ms doubling to 1 s). Only for calls that are
    safe to repeat, such as enqueues with fixed ids. Gives up with RedisUnavailable."""
    give_up = time.monotonic() + retry_for
    pause = 0.05
    while True:
        try:
            return call()
        except RedisUnavailable:
            raise
        except (ConnectionError, TimeoutError) as exc:
            if time.monotonic() + pause > give_up:
                raise RedisUnavailable.after(exc, retry_for) from exc
            sleep(pause)
            pause = min(pause * 2, 1.0)
