"""A pump's fetching while the Redis server is at ``maxmemory`` (``noeviction``).

The server then refuses to hand out jobs (lua/lib/core/needs_memory.lua) but still applies
acknowledgements and lease extensions (lua/lib/core/frees_memory.lua), which free memory. So
a refused fetch stops fetching for a while, from 50 ms doubling up to 1 s, while the
acknowledgements of the jobs in hand go on: a worker never takes jobs whose own writes
(results, follow-up enqueues) the server would refuse, and memory beyond the limit
stays bounded by the jobs in hand.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from durq.metrics import WorkerMetrics

__all__ = ["MemoryBackoff"]

log = logging.getLogger("durq.worker")

FIRST, MOST = 0.05, 1.0  # seconds of the first back-off, and of the longest
LOG_EVERY = 60  # refusals between two warnings while it lasts


class MemoryBackoff:
    """When the pump of ``queue`` may fetch again; ``wake`` is called when it may."""

    def __init__(self, queue: str, metrics: WorkerMetrics, wake: Callable[[], None]) -> None:
        self.queue = queue
        self.metrics = metrics
        self.wake = wake
        self.refusals = 0  # fetches refused in a row
        self._since = 0.0
        self._until = 0.0  # no fetch before this (loop time); 0: none refused lately

    def holding(self) -> bool:
        """True while fetching waits for the server to have memory again."""
        if not self._until:
            return False
        if asyncio.get_running_loop().time() < self._until:
            return True
        self._until = 0.0
        return False

    def refused(self) -> None:
        """The server refused a fetch for want of memory: hold fetching for a while
        (logged at the first refusal, and sparsely while they go on)."""
        loop = asyncio.get_running_loop()
        self.refusals += 1
        self.metrics.fetch_out_of_memory(self.queue)
        if self.refusals == 1:
            self._since = loop.time()
        if self.refusals == 1 or self.refusals % LOG_EVERY == 0:
            log.warning(
                "queue %s: Redis is at maxmemory and refuses to hand out jobs; backing off "
                "(the jobs in hand are still acknowledged). Free memory or raise maxmemory "
                "(refused %d times in %.0f s)",
                self.queue,
                self.refusals,
                loop.time() - self._since,
            )
        self._until = loop.time() + min(FIRST * 2 ** (self.refusals - 1), MOST)
        loop.call_at(self._until, self.wake)

    def fetched(self) -> None:
        """A fetch was served: say so when it ends a run of refusals."""
        if not self.refusals:
            return
        log.info(
            "queue %s: Redis has memory again: fetching after %d refusals in %.1f s",
            self.queue,
            self.refusals,
            asyncio.get_running_loop().time() - self._since,
        )
        self.refusals = 0
