"""What a worker does once per heartbeat besides its registry beat: look at each queue
it waits on for the work that no wake marker announces. While the worker is idle and a
look finds nothing to watch, the next comes only after ``IDLE_HEARTBEAT`` (10 min,
``worker.pace``), or when a schedule asks for ticks, if sooner; the capabilities' saying
rides with it.

An idle worker sends nothing else: its pumps (batch tasks' too) and outbox couriers
block on their wake markers until the next delayed job, schedule tick or lease end they
know of is due (``durq.worker.pump``, ``durq.worker.batches``, ``durq.worker.outbox``;
up to ``IDLE_BLOCK``). Some work is due at a time no marker tells them, and this look,
one round trip of plain O(1) reads per queue (``durq.protocol.wake.look``), finds it:

- a lease taken by another consumer after a wait was planned: if its holder dies, the
  job must come back when the lease ends (the pump's or courier's own marker is rung
  then, ``Alarm.due``, and its fetch reclaims the job). The dequeue script that writes
  a lease which becomes the queue's earliest also rings an idle consumer whose wait
  would end after it (``lua/lib/core/idlers.lua``): so the stretched looks of an idle
  worker need not come sooner for it (a batch task's pump, which the script does not
  list, waits for the next look: up to 10 minutes);
- a flow-control alarm held by another consumer (``docs/flow-control.md``): if that
  holder dies, the parked work it owed waits for whoever wakes first after its time;
- cron schedules that want more ticks (``worker.schedules``): refilled when due;
- held jobs (``worker.holding``): the capabilities are published, bringing back those
  this worker runs, and dead-lettering those no worker has run for the grace. They are
  also published at start, and said again (their timestamps alone, ``Holding.seen``)
  while no job is held: every quarter of the grace while looks come each heartbeat, and
  with each stretched look while idle, each saying covering past the next look, so that
  the queue knows who runs what.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from durq.protocol import wake
from durq.worker.pace import Pace

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
    tasks) and outboxes (``couriers``) at ``pace`` (every heartbeat; stretched while the
    worker is idle and the last look found nothing to watch), and acts on what it
    finds."""

    def __init__(
        self,
        pumps: Sequence[QueuePump],
        batch_pumps: Sequence[BatchPump],
        couriers: Sequence[OutboxCourier],
        schedules: ScheduleKeeper,
        holding: Holding,
        pace: Pace,
    ) -> None:
        self.pumps = list(pumps)
        self.batch_pumps = list(batch_pumps)
        self.couriers = list(couriers)
        self.schedules = schedules
        self.holding = holding
        self.pace = pace
        # the upkeep's own pace: a pump woken for nothing cuts its stretched wait
        self.looks = Pace(pace.interval, pace.idle, pace.longest)
        for pump in self.pumps:
            pump.woke_empty = self.soon
        for batch_pump in self.batch_pumps:
            batch_pump.woke_empty = self.soon
        # the capabilities' last saying covers at least this far past the next look
        # (a quarter of the grace, as when they were said every quarter of it)
        self.refresh = max(pace.interval, holding.grace / 4)
        self._covered = 0.0  # time.monotonic() until which the last saying covers
        #: seconds until the next look must come at the latest (a schedule's refill
        #: due, something to watch): None when the last look found nothing (the first
        #: look comes a heartbeat after the start)
        self._soon: float | None = 0.0
        # per waiter (its index), the past flow-control alarm it was woken for last
        self._past_alarms: dict[int, int] = {}

    def soon(self) -> None:
        """A pump woke for nothing (e.g. its wait ended at the time it planned for a
        schedule, whose ticks may have run out): look at the next heartbeat."""
        self.looks.soon()

    async def run(self) -> None:
        """Publish the capabilities, then look at ``pace``, until cancelled (a failed look
        is tried again at the next)."""
        await self._publish(self._within())
        while True:
            await self.looks.sleep(self._within())
            await self.once()

    def _within(self) -> float:
        """The longest time to the next look: a heartbeat while something is watched,
        else up to the stretched interval, or the refill due."""
        interval = self.pace.interval
        if self._soon is not None and self._soon <= interval:
            return interval
        within = self.looks.within()
        return within if self._soon is None else min(within, self._soon)

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
        soon: list[float] = []
        for i, (waiter, look) in enumerate(zip(waiters, looks, strict=False)):
            if isinstance(look, BaseException):
                log.debug("queue %s: upkeep look failed: %s", waiter.name, look)
                soon.append(0.0)  # look again at the next heartbeat
                continue
            look = self._past_alarm_once(i, look)
            waiter.watch(look)
            soon += _soon(look)
            held = held or (i < len(pumps) and look.held)  # batch tasks hold nothing
            if look.refill:
                refill.append(waiter.queue)
        for courier, look in zip(couriers, looks[len(waiters) :], strict=True):
            if isinstance(look, BaseException):
                log.debug("outbox of %s: upkeep look failed: %s", courier.queue.name, look)
                soon.append(0.0)
                continue
            courier.watch(look)
            soon += _soon(look)
        self._soon = min(soon) if soon else None
        if refill:
            await self.schedules.refill(refill)
        # the capabilities, said at the look that sees their last saying cover less
        # than `refresh` past the next one: every `refresh` while the looks come each
        # heartbeat, at each stretched look while idle
        within = self._within()
        if held:
            await self._publish(within)
        elif time.monotonic() + within > self._covered - self.refresh:
            await self.holding.seen(self.pumps, self._ahead(within))

    def _past_alarm_once(self, i: int, look: wake.Look) -> wake.Look:
        """``look`` of waiter ``i``, a past alarm (its holder should have woken: it may
        have died) acted on once: an alarm outlives its time by more than a stretched
        look (``lua/lib/limits/park.lua``), and one its holder served stays until then,
        which must not wake this waiter, nor keep the looks at every heartbeat, again
        and again."""
        if look.alarm_ms != 0:
            return look
        if self._past_alarms.get(i) == look.alarm_at:
            return dataclasses.replace(look, alarm_ms=-1)
        self._past_alarms[i] = look.alarm_at
        return look

    def _ahead(self, within: float) -> float:
        """How far ahead a saying of the capabilities covers, the next look ``within``
        seconds away: past it by ``refresh``, and by ``refresh`` past a ``refresh``
        from now at least (one saying per ``refresh`` while looks come every
        heartbeat)."""
        ahead = max(within, self.refresh) + self.refresh
        self._covered = time.monotonic() + ahead
        return ahead

    async def _publish(self, within: float) -> None:
        await self.holding.publish(self.pumps, self._ahead(within))


def _soon(look: wake.Look) -> list[float]:
    """What a look found that the next look must come for, in seconds from now: a
    lease or an alarm watched (0: at the next heartbeat), held jobs (0), the next
    cron refill."""
    soon = [0.0] if look.lease_ms >= 0 or look.alarm_ms >= 0 or look.held or look.refill else []
    if look.refill_ms >= 0:
        soon.append(look.refill_ms / 1000)
    return soon
