"""Retry delays: how long a failed job waits before its next attempt.

A backoff is any callable ``(attempt) -> seconds`` where ``attempt`` is the number of
the attempt that just failed (1 for the first).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from durq.errors import InvalidArgument

__all__ = ["Backoff", "exponential", "fixed"]

Backoff = Callable[[int], float]
"""A retry delay: ``(attempt) -> seconds``, called with the number of the attempt that
just failed (1 for the first)."""


def exponential(
    base: float = 1.0, factor: float = 2.0, cap: float = 300.0, jitter: bool = True
) -> Backoff:
    """``base * factor ** (attempt - 1)`` seconds, at most ``cap``; with ``jitter`` the
    delay is drawn uniformly from its upper half, so retries of many jobs that failed
    together do not come back together."""
    if base <= 0 or factor < 1 or cap < base:
        raise InvalidArgument("exponential backoff needs base > 0, factor >= 1, cap >= base")

    def delay(attempt: int) -> float:
        value = min(cap, base * factor ** max(attempt - 1, 0))
        return random.uniform(value / 2, value) if jitter else value

    return delay


def fixed(seconds: float) -> Backoff:
    """The same delay after every failure."""
    if seconds < 0:
        raise InvalidArgument("a fixed backoff needs seconds >= 0")
    return lambda attempt: seconds
