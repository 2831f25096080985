"""Waking an idle consumer on time.

An idle consumer blocks on its queue's wake marker (BZPOPMIN) with a timeout: the time
at which work is due (a delayed job, an expired lease, a group parked by its rate limit).
Redis checks blocking timeouts only ``hz`` times a second (10 by default), so such a wait
ends up to 100 ms late: at 20 jobs per second that would halve the rate. So the consumer
also blocks on a marker of its own (``<prefix>ring:<consumer>``, in the queue's slot) and
a local timer sets it when the wait is due: the wait then ends within a millisecond or
two, for the cost of one ZADD. Only the consumer that planned the wait is woken; a
rate-limited queue has one such consumer at a time (the alarm, src/durq/lua/lib/limits/park.lua).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from redis.exceptions import RedisError

from durq.errors import DurqError
from durq.protocol import wake

if TYPE_CHECKING:
    from durq._async.queue import AsyncQueue

__all__ = ["Alarm"]

_RING_TTL_MS = 60_000  # a marker left by a consumer that died goes away by itself


class Alarm:
    """The consumer id and the own wake marker of one queue pump."""

    def __init__(self, queue: AsyncQueue) -> None:
        self.queue = queue
        self.consumer = secrets.token_hex(6)
        self.ring_key = f"{queue.keys.prefix}ring:{self.consumer}"
        self._ringing: asyncio.Task[None] | None = None

    @asynccontextmanager
    async def ring_after(self, seconds: float | None) -> AsyncIterator[None]:
        """Set this consumer's own marker after ``seconds`` unless the block ends first
        (None: no ring; a plain idle wait, which only bounds the block, needs none)."""
        if seconds is None:
            yield
            return
        handle = asyncio.get_running_loop().call_later(seconds, self._ring)
        try:
            yield
        finally:
            handle.cancel()

    def ring(self) -> None:
        """Set this consumer's own marker now: its blocked wait ends, no other's."""
        self._ring()

    def pending(self) -> list[asyncio.Task[None]]:
        """The ring being sent, if any (for the pump to cancel when it stops)."""
        return [self._ringing] if self._ringing is not None and not self._ringing.done() else []

    def _ring(self) -> None:
        if self._ringing is None or self._ringing.done():
            self._ringing = asyncio.create_task(self._send(), name=f"durq-ring-{self.consumer}")

    async def _send(self) -> None:
        # on failure the wait ends by its own timeout, a little later
        with contextlib.suppress(RedisError, DurqError, OSError):
            await self.queue._run(wake.ring(self.ring_key, _RING_TTL_MS))
