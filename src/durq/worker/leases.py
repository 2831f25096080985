"""Keeping the leases of jobs in hand alive while the worker lives.

Every third of the shortest lease, the worker extends the leases of all its jobs (one
round trip per queue). A job that runs past its task's timeout is not extended: if the
worker is hung rather than dead, its lease lapses and another worker recovers the job.
A refused extension means another worker was handed the job: the local run is cancelled
when it is async (a sync call cannot be stopped; its outcome is discarded).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from redis.exceptions import ConnectionError, RedisError, TimeoutError

from durq.errors import DurqError
from durq.protocol.status import Status

if TYPE_CHECKING:
    from durq.worker.runner import InHand, Worker

__all__ = ["LeaseKeeper"]

log = logging.getLogger("durq.worker")


class LeaseKeeper:
    """Extends the leases of a Worker's jobs."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    def interval(self) -> float:
        """Seconds between rounds: a third of the shortest lease in use."""
        leases = [self.worker.lease] + [
            t.config.lease for t in self.worker.app.tasks.values() if t.config.lease
        ]
        return max(min(leases) / 3, 0.05)

    def _due(self, held: InHand, now: float) -> bool:
        timeout = held.task.config.timeout if held.task else None
        # a job hung past its timeout is not extended: its lease lapses
        return timeout is None or held.started is None or now - held.started <= timeout + 1

    async def run(self) -> None:
        """Extend leases until cancelled."""
        while True:
            await asyncio.sleep(self.interval())
            await self.extend_all()

    async def extend_all(self) -> None:
        """One round: extend every job in hand, one round trip per queue and lease."""
        now = time.monotonic()
        by_call: dict[tuple[str, float], list[InHand]] = {}
        for held in list(self.worker.in_hand.values()):
            if self._due(held, now):
                lease = (held.task.config.lease if held.task else None) or self.worker.lease
                by_call.setdefault((held.job.queue, lease), []).append(held)
        for (queue_name, lease), items in by_call.items():
            queue = self.worker.pumps[queue_name].queue
            try:
                statuses = await queue.extend_many([h.job for h in items], lease=lease)
            except (ConnectionError, TimeoutError, OSError, RedisError, DurqError) as exc:
                log.warning("could not extend %d leases on %s: %s", len(items), queue_name, exc)
                continue
            for held, status in zip(items, statuses, strict=True):
                if status != Status.OK:
                    self.worker.lease_lost(held, Status(status).name)
