"""What a worker does once per heartbeat besides its registry beat: look at each queue
it waits on for the work that no wake marker announces.

An idle worker sends nothing else: its pumps and outbox couriers block on their wake
markers until the next delayed job, schedule tick or lease end they know of is due
(``durq.worker.pump``, ``durq.worker.outbox``; up to ``IDLE_BLOCK``). Some work is due
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
    from durq._async.queue import AsyncQueue
    from durq.worker.holding import Holding
    from durq.worker.outbox import OutboxCourier
    from durq.worker.pump import QueuePump
    from durq.worker.schedules import ScheduleKeeper

__all__ = ["Upkeep"]

log = logging.getLogger("durq.worker")


class Upkeep:
    """Looks at a worker's queues (its ``pumps``; ``batch_queues``, the queues of its
    batch tasks, for their schedules only: their pumps wait 5 s at most) and outboxes
    (``couriers``) every ``interval`` seconds (the heartbeat's), and acts on what it
    finds."""

    def __init__(
        self,
        pumps: Sequence[QueuePump],
        batch_queues: Sequence[AsyncQueue],
        couriers: Sequence[OutboxCourier],
        schedules: ScheduleKeeper,
        holding: Holding,
        interval: float,
    ) -> None:
        self.pumps = list(pumps)
        self.batch_queues = list(batch_queues)
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
        pumps, batch_queues, couriers = self.pumps, self.batch_queues, self.couriers
        looks: list[Any] = await asyncio.gather(
            *(p.queue._run(wake.look(p.queue.keys, p.alarm.consumer)) for p in pumps),
            *(q._run(wake.look(q.keys)) for q in batch_queues),
            *(c.queue._run(wake.look(c.keys, queue=False)) for c in couriers),
            return_exceptions=True,
        )
        refill, held = [], False
        queues = [*(p.queue for p in pumps), *batch_queues]
        for i, (queue, look) in enumerate(zip(queues, looks, strict=False)):
            if isinstance(look, BaseException):
                log.debug("queue %s: upkeep look failed: %s", queue.name, look)
                continue
            if i < len(pumps):
                pumps[i].watch(look)
                held = held or look.held
            if look.refill:
                refill.append(queue)
        for courier, look in zip(couriers, looks[len(queues) :], strict=True):
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
