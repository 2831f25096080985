"""Waking an idle consumer on time.

An idle consumer blocks on its queue's wake marker (BZPOPMIN) with a timeout: the time
at which work is due (a delayed job, an expired lease, a group parked by its rate limit).
Redis checks blocking timeouts only ``hz`` times a second (10 by default), so such a wait
ends up to 100 ms late: at 20 jobs per second that would halve the rate. So the consumer
also blocks on a marker of its own (``<prefix>ring:<consumer>``, in the queue's slot) and
a local timer sets it when the wait is due: the wait then ends within a millisecond or
two, for the cost of one ZADD. Only the consumer that planned the wait is woken; a
rate-limited queue has one such consumer at a time (the alarm, src/durq/lua/lib/limits/park.lua).

The same marker ends an idle wait early when the worker's upkeep (``worker.upkeep``, once
per heartbeat) finds work due that the wait was not planned for: ``due``.
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
    from durq.keys import QueueKeys

__all__ = ["RING_TTL_MS", "Alarm"]

#: a marker left by a consumer that died goes away by itself (lua/lib/core/idlers.lua
#: sets the same)
RING_TTL_MS = 60_000


class Alarm:
    """The consumer id and the own wake marker of one queue pump (or outbox courier:
    ``keys``, the outbox's, in the queue's slot)."""

    def __init__(self, queue: AsyncQueue, keys: QueueKeys | None = None) -> None:
        self.queue = queue
        self.consumer = secrets.token_hex(6)
        self.ring_key = f"{(keys or queue.keys).prefix}ring:{self.consumer}"
        self._ringing: asyncio.Task[None] | None = None
        self._ends: float | None = None  # the loop time the wait under way ends, if any
        self._due: asyncio.TimerHandle | None = None

    def waiting(self, seconds: float) -> None:
        """A wait of up to ``seconds`` on the marker begins (``due`` may end it sooner)."""
        self._ends = asyncio.get_running_loop().time() + seconds

    def woke(self) -> None:
        """The wait ended: a ring ``due`` set for it is not needed any more."""
        self._ends = None
        if self._due is not None:
            self._due.cancel()
            self._due = None

    def due(self, seconds: float) -> None:
        """Work is due in ``seconds`` that the wait under way was not planned for: ring
        then, unless the wait ends first anyway (or none is under way)."""
        loop = asyncio.get_running_loop()
        at = loop.time() + seconds
        if self._ends is None or at >= self._ends:
            return
        if self._due is not None:
            if self._due.when() <= at:
                return  # rings sooner already
            self._due.cancel()
        self._due = loop.call_at(at, self._ring)

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
            await self.queue._run(wake.ring(self.ring_key, RING_TTL_MS))
