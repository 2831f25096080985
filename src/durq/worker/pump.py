"""The loop that moves one queue's jobs: each round trip sends the buffered
acknowledgements and fetches as many jobs as there are free slots. When the queue is
empty a separate waiter blocks on the queue's wake marker (no polling), while the pump
stays free to send the acknowledgements of jobs that finish meanwhile."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from redis.exceptions import ConnectionError, RedisError, TimeoutError

from durq._async.queue import AsyncQueue
from durq.errors import DurqError
from durq.protocol import ops
from durq.protocol.calls import WaitCall
from durq.protocol.status import Status
from durq.worker.acks import AckBuffer

if TYPE_CHECKING:
    from durq.worker.runner import Worker

__all__ = ["QueuePump"]

log = logging.getLogger("durq.worker")
_TRANSIENT = (ConnectionError, TimeoutError, OSError)


class QueuePump:
    """Fetches and acknowledges the jobs of one queue for a Worker."""

    def __init__(self, worker: Worker, queue: AsyncQueue) -> None:
        self.worker = worker
        self.queue = queue
        self.acks = AckBuffer()
        self.changed = asyncio.Event()
        self.in_hand = 0
        self.drained = False  # burst mode: nothing ready, running or scheduled
        self._wait_armed = asyncio.Event()
        self._wait_timeout = ops.MAX_BLOCK
        self._failures = 0

    @property
    def name(self) -> str:
        """The queue's name."""
        return self.queue.name

    async def run(self) -> None:
        """Run until the worker stops accepting jobs and every outcome was sent."""
        waiter = asyncio.create_task(self._waiter(), name=f"durq-wait-{self.name}")
        try:
            await self._loop()
        finally:
            waiter.cancel()
            await asyncio.gather(waiter, return_exceptions=True)

    async def _loop(self) -> None:
        while True:
            self.changed.clear()
            want = min(self.worker.room(), self.worker.config.batch)
            taken = self.acks.take(self.worker.config.batch)
            if not taken and want == 0:
                if not self.worker.accepting and self.in_hand == 0 and not self.acks:
                    return
                await self.changed.wait()
                continue
            try:
                fetched, next_ms = await self._round_trip(taken, want)
            except _TRANSIENT as exc:
                self.acks.put_back(taken)
                await self._pause(exc)
                continue
            except (DurqError, RedisError) as exc:  # e.g. a key of the wrong type
                self.acks.put_back(taken)
                await self._pause(exc)
                continue
            self._failures = 0
            if fetched or want == 0:
                continue
            if self.worker.config.burst and next_ms < 0 and self.in_hand == 0 and not self.acks:
                self.drained = True
                if self.worker.drained():
                    self.worker.stop_accepting()
                    continue
            self._wait_timeout = ops.MAX_BLOCK if next_ms < 0 else max(next_ms / 1000, 0.001)
            self._wait_armed.set()
            await self.changed.wait()

    async def _round_trip(self, taken: list[Any], want: int) -> tuple[int, int]:
        sends = AckBuffer.ops(self.queue.keys, taken, self.queue.result_ttl)
        batch = [op for _, _, op in sends]
        if want:
            batch.append(ops.fetch(self.queue.keys, self.queue.codec, want, self.worker.lease))
        results = await self.queue._driver.run_all(batch)
        for (kind, jobs, _), result in zip(sends, results, strict=False):
            self._check_acks(kind, jobs, result)
        if not want:
            return 0, -1
        fetched = results[-1]
        if isinstance(fetched, BaseException):
            raise fetched
        jobs, next_ms, reclaimed = fetched
        if reclaimed:
            self.worker.metrics.reclaimed(self.name, reclaimed)
        if jobs:
            self.drained = False
            self.in_hand += len(jobs)
            self.worker.accept(self, jobs)
        return len(jobs), next_ms

    def _check_acks(self, kind: str, jobs: list[Any], result: Any) -> None:
        if isinstance(result, BaseException):
            # the script refused the whole batch (e.g. a corrupted key): the jobs stay
            # leased and come back after their lease; say so loudly
            log.error("%s of %d jobs on %s failed: %s", kind, len(jobs), self.name, result)
            return
        for job, status in zip(jobs, result, strict=True):
            if status not in (Status.OK, Status.RETRYING, Status.DEAD):
                log.warning(
                    "%s of job %s on %s refused (%s): its lease had expired and it was "
                    "handed out again, so it may run twice",
                    kind,
                    job.id,
                    self.name,
                    Status(status).name,
                )
                self.worker.metrics.lease_lost(self.name)

    async def _pause(self, exc: BaseException) -> None:
        self._failures += 1
        delay = min(0.05 * 2**self._failures, 2.0)
        if self._failures in (1, 3) or self._failures % 20 == 0:
            log.warning(
                "queue %s: %s: %s; retrying (attempt %d)",
                self.name,
                type(exc).__name__,
                exc,
                self._failures,
            )
        await asyncio.sleep(delay)

    async def _waiter(self) -> None:
        """Block on the queue's wake marker while the pump has nothing to fetch."""
        failures = 0
        while True:
            await self._wait_armed.wait()
            self._wait_armed.clear()
            try:
                await self.queue._driver.execute(
                    WaitCall((self.queue.keys.wake,), min(self._wait_timeout, ops.MAX_BLOCK))
                )
                failures = 0
            except _TRANSIENT:
                failures += 1
                await asyncio.sleep(min(0.05 * 2**failures, 2.0))
            self.changed.set()
