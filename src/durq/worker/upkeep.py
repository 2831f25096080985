"""What a worker does once per heartbeat besides its registry beat: look at each queue
it waits on for the work that no wake marker announces.

An idle worker sends nothing else: its pumps (batch tasks' too) and outbox couriers
block on their wake markers until the next delayed job, schedule tick or lease end they
know of is due (``durq.worker.pump``, ``durq.worker.batches``, ``durq.worker.outbox``;
up to ``IDLE_BLOCK``). Some work is due
at a time no marker tells them, and this look, one round trip of plain O(1) reads per
queue (``durq.protocol.wake.look``), finds it:

- a lease taken by another consumer after a wait was planned: if its holder dies, the
  job must come back when the lease ends (the pump's or courier's own marker is rung
  then, ``Alarm.due``, and its fetch reclaims the job);
- a flow-control alarm held by another consumer (``docs/flow-control.md``): if that
  holder dies, the parked work it owed waits for whoever wakes first after its time;
- cron schedules that want more ticks (``worker.schedules``): refilled when due;
- held jobs (``worker.holding``): the capabilities are published, bringing back those
  this worker runs, and dead-lettering those no worker has run for the grace. They are
  also published at start, and every quarter of the grace, so that the queue knows who
  runs what.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from durq.protocol import wake

if TYPE_CHECKING:
    from durq.worker.batches import BatchPump
    from durq.worker.holding import Holding
    from durq.worker.outbox import OutboxCourier
    from durq.worker.pump import QueuePump
    from durq.worker.schedules import ScheduleKeeper

__all__ = ["Upkeep"]

log = logging.getLogger("durq.worker")


class Upkeep:
    """Looks at a worker's queues (its ``pumps``, and the ``batch_pumps`` of its batch
    tasks) and outboxes (``couriers``) every ``interval`` seconds (the heartbeat's), and
    acts on what it finds."""

    def __init__(
        self,
        pumps: Sequence[QueuePump],
        batch_pumps: Sequence[BatchPump],
        couriers: Sequence[OutboxCourier],
        schedules: ScheduleKeeper,
        holding: Holding,
        interval: float,
    ) -> None:
        self.pumps = list(pumps)
        self.batch_pumps = list(batch_pumps)
        self.couriers = list(couriers)
        self.schedules = schedules
        self.holding = holding
        self.interval = interval
        # capabilities are said again at least this often, held jobs or not
        self.refresh = max(interval, holding.grace / 4)
        self._published = 0.0

    async def run(self) -> None:
        """Publish the capabilities, then look every ``interval`` seconds, until
        cancelled (a failed look is tried again at the next)."""
        await self._publish()
        while True:
            await asyncio.sleep(self.interval)
            await self.once()

    async def once(self) -> None:
        """One look at every queue and outbox, and what follows from it."""
        pumps, couriers = self.pumps, self.couriers
        waiters: list[QueuePump | BatchPump] = [*pumps, *self.batch_pumps]
        looks: list[Any] = await asyncio.gather(
            *(p.queue._run(wake.look(p.queue.keys, p.alarm.consumer)) for p in waiters),
            *(c.queue._run(wake.look(c.keys, queue=False)) for c in couriers),
            return_exceptions=True,
        )
        refill, held = [], False
        for i, (waiter, look) in enumerate(zip(waiters, looks, strict=False)):
            if isinstance(look, BaseException):
                log.debug("queue %s: upkeep look failed: %s", waiter.name, look)
                continue
            waiter.watch(look)
            held = held or (i < len(pumps) and look.held)  # batch tasks hold nothing
            if look.refill:
                refill.append(waiter.queue)
        for courier, look in zip(couriers, looks[len(waiters) :], strict=True):
            if isinstance(look, BaseException):
                log.debug("outbox of %s: upkeep look failed: %s", courier.queue.name, look)
                continue
            courier.watch(look)
        if refill:
            await self.schedules.refill(refill)
        if held or time.monotonic() - self._published >= self.refresh:
            await self._publish()

    async def _publish(self) -> None:
        self._published = time.monotonic()
        await self.holding.publish(self.pumps)
