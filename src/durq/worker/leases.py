"""Keeping the leases of jobs in hand alive while the worker lives.

Every third of the shortest lease, the worker extends the leases of all its jobs (one
round trip per queue). A job that runs past its task's timeout is not extended: if the
worker is hung rather than dead, its lease lapses and another worker recovers the job.
A refused extension means another worker was handed the job: the local run is cancelled
when it is async (a sync call cannot be stopped; its outcome is discarded). An extension
answered CANCELLED means a cancel of the job was asked (the durable flag, see
``durq.worker.control``): the worker stops it. ``poke()`` runs a round at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

from redis.exceptions import ConnectionError, RedisError, TimeoutError

from durq._async.queue import AsyncQueue
from durq.app.task import Task
from durq.errors import DurqError
from durq.models import Outcome
from durq.worker.capacity import Capacity, Delivery

__all__ = ["LeaseKeeper"]

log = logging.getLogger("durq.worker")


class LeaseKeeper:
    """Extends the leases of a Worker's jobs.

    Args:
        capacity: the worker's slots, whose deliveries are the jobs to keep.
        queues: the queues (and shards) the worker consumes, by name.
        tasks: the tasks that may run, for their leases and timeouts.
        lease: the worker's lease, for tasks that declare none.
        lost: called with a delivery whose extension was refused, and why.
        cancelled: called with a delivery whose cancel was asked.
        bounded: True for a delivery whose run ends by a bounded time whatever the task
            does (the process pool kills it): extended past its timeout until then.
    """

    def __init__(
        self,
        capacity: Capacity,
        queues: Mapping[str, AsyncQueue],
        tasks: Collection[Task[Any, Any]],
        lease: float,
        lost: Callable[[Delivery, str], None],
        cancelled: Callable[[Delivery], None] = lambda delivery: None,
        *,
        bounded: Callable[[Delivery], bool] = lambda delivery: False,
    ) -> None:
        self.capacity = capacity
        self.queues = queues
        self.tasks = tasks  # a live view: tasks registered later count too
        self.lease = lease
        self.lost = lost
        self.cancelled = cancelled
        self.bounded = bounded
        self._poked = asyncio.Event()

    def poke(self) -> None:
        """Run a round now (a cancel channel's message: the flag may be set)."""
        self._poked.set()

    def interval(self) -> float:
        """Seconds between rounds: a third of the shortest lease in use."""
        leases = [self.lease] + [t.config.lease for t in self.tasks if t.config.lease]
        return max(min(leases) / 3, 0.05)

    def _due(self, delivery: Delivery, now: float) -> bool:
        timeout = delivery.task.config.timeout if delivery.task else None
        started = delivery.started
        # a job hung past its timeout is not extended: its lease lapses; unless its run
        # is bounded (a process pool's child, killed kill_grace after its timeout)
        return (timeout is None or started is None or now - started <= timeout + 1) or self.bounded(
            delivery
        )

    async def run(self) -> None:
        """Extend leases until cancelled."""
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._poked.wait(), self.interval())
            self._poked.clear()
            await self.extend_all()

    async def extend_all(self) -> None:
        """One round: extend every job in hand, one round trip per queue and lease."""
        now = time.monotonic()
        by_call: dict[tuple[str, float], list[Delivery]] = {}
        for delivery in list(self.capacity.deliveries.values()):
            if self._due(delivery, now):
                lease = (delivery.task.config.lease if delivery.task else None) or self.lease
                by_call.setdefault((delivery.job.queue, lease), []).append(delivery)
        for (queue_name, lease), items in by_call.items():
            queue = self.queues[queue_name]
            try:
                statuses = await queue.extend_many([d.job for d in items], lease=lease)
            except (ConnectionError, TimeoutError, OSError, RedisError, DurqError) as exc:
                log.warning("could not extend %d leases on %s: %s", len(items), queue_name, exc)
                continue
            self.report(items, statuses)

    def report(self, items: list[Delivery], statuses: list[Outcome]) -> None:
        """Act on the outcomes of one extension round trip. A delivery that finished
        while it was under way is none of its business: its release may have been
        applied first (the extension then finds the job gone, which is no lost lease),
        and its acknowledgement's own reply says whether the lease was lost."""
        deliveries = self.capacity.deliveries
        for delivery, status in zip(items, statuses, strict=True):
            if status is Outcome.OK or deliveries.get(delivery.key) is not delivery:
                continue
            if status is Outcome.CANCELLED:
                self.cancelled(delivery)
            else:
                self.lost(delivery, status.name)
