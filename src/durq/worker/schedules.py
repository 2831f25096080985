"""The worker's part in periodic jobs: upsert the app's schedules on start, and keep
the cron schedules of its queues supplied with upcoming ticks.

Ticks themselves are fired by the dequeue script (lua/lib/schedules/due.lua), in whichever
worker dequeues first; nothing here fires a job, so a worker that dies or lags here
cannot lose or duplicate a tick. Cron times are computed in Python (cronsim) and stored
ahead; a cron schedule asks for more once half are used, and the worker's upkeep looks
for such requests once per heartbeat (one read per queue, ``worker.upkeep``), never per
job, and refills the queues that have one due.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from durq._async.retry import retrying
from durq.app.schedule_control import SyncReport
from durq.cron import timing_of
from durq.protocol import schedules as ops

if TYPE_CHECKING:
    from durq._async.queue import AsyncQueue
    from durq.app.schedule_control import Schedules

__all__ = ["ScheduleKeeper"]

log = logging.getLogger("durq.worker")


class ScheduleKeeper:
    """Upserts and refills the schedules of one Worker's queues.

    ``queue_names`` are the queues the worker was told to consume, ``queues`` the queue
    (or shard) objects it fetches from, and ``client`` its asyncio client."""

    def __init__(
        self,
        schedules: Schedules,
        queue_names: Sequence[str],
        queues: Sequence[AsyncQueue],
        client: Any,
    ) -> None:
        self.schedules = schedules
        self.queue_names = list(queue_names)
        self.queues = list(queues)
        self.client = client

    async def start(self) -> None:
        """Upsert the declared schedules of the worker's queues, say which schedules the
        code no longer declares or declares in another queue, and refill what needs it:
        before the first dequeue. An app that declares no schedule still looks: the
        schedules an earlier version declared are reported all the same."""

        async def sync() -> SyncReport:
            return await self.schedules.aupsert(self.queue_names, client=self.client)

        report = await retrying(sync, 30.0)
        changed = report.created + report.changed + report.updated
        if changed:
            log.info("schedules upserted: %s", ", ".join(changed))
        for queue, name in report.missing:
            log.warning(
                "schedule %r of queue %s is no longer declared in the code: remove it "
                "with `durq schedules remove %s -q %s` (or app.sync_schedules("
                "remove_missing=True))",
                name, queue, name, queue,
            )  # fmt: skip
        for queue, name, home in report.moved:
            log.warning(
                "schedule %r moved from queue %s to %s in the code: removed from %s, "
                "it fires in %s only",
                name, queue, home, queue, home,
            )  # fmt: skip
        await self.refill()

    async def refill(self, queues: Sequence[AsyncQueue] | None = None) -> None:
        """Store more ticks for the cron schedules that asked for them, in ``queues``
        (default: all the worker's). A Redis outage is logged, and the refill tried
        again when the upkeep finds it due again."""
        for queue in self.queues if queues is None else queues:
            try:
                done = await queue._run(ops.refill(queue.keys, timing_of))
            except (RedisError, OSError) as exc:
                log.debug("schedule refill of %s failed: %s", queue.name, exc)
                continue
            if done:
                log.debug("refilled the ticks of %d schedules of %s", done, queue.name)
