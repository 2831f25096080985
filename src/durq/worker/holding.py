"""A worker's side of the holding area (``durq.protocol.holding``).

- A job the worker cannot run (its task is not in the app, or not at the job's version)
  is held: its outcome is ``hold``, sent with the pump's next round trip like any
  acknowledgement (``hold``), no attempt counted.
- At start, then whenever the upkeep's look once per heartbeat (``worker.upkeep``) finds
  held jobs in a queue it consumes, the worker says on every queue it consumes which
  capabilities it has (``publish``); the reply names those of them that have held jobs.
  While no look finds any, it says so again for a few commands (``seen``: the
  timestamps alone; its capabilities never change while it runs) with the looks that
  come when its last saying would otherwise cover less than a quarter of the grace past
  the next look: every quarter of the grace while busy, with each stretched look while
  idle (``worker.upkeep``). Each saying tells until when it covers (its time and that
  far ahead, lib/holding/seen.lua), so that a job held later is not dead-lettered
  while it lives, however long its idle looks are apart. Its pumps then
  bring such jobs back in their next round trips, right before their fetch (``unhold``,
  as many as they fetch), until none is left: no extra round trip, and none at all while
  nothing is held. A pump blocked on its queue's wake marker is woken through its own
  marker, so other idle consumers are not.
- The same call dead-letters jobs held for a capability that no worker of the queue has
  had for ``App(unknown_task_grace=...)`` past the time its last saying covered (reason
  ``unknown_task``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from durq.app.task import Task
from durq.keys import QueueKeys
from durq.models import Job
from durq.protocol import holding
from durq.protocol.calls import Op

if TYPE_CHECKING:
    from durq.worker.pump import QueuePump

__all__ = ["Holding", "capabilities"]

log = logging.getLogger("durq.worker")


def capabilities(tasks: Iterable[Task[Any, Any]]) -> list[str]:
    """The capabilities of a worker that runs ``tasks``: each task at each version it
    runs (sorted)."""
    return sorted(holding.capability(task.name, v) for task in tasks for v in task.versions)


class Holding:
    """Publishes one worker's capabilities and has its pumps bring held jobs back.

    Args:
        tasks: the tasks the worker runs.
        worker_id: the worker's id (kept in a held job's reason, for people).
        grace: ``unknown_task_grace`` in seconds (0: jobs the worker cannot run are
            dead-lettered at once, as before the holding area).
    """

    def __init__(self, tasks: Iterable[Task[Any, Any]], worker_id: str, grace: float) -> None:
        self.caps = capabilities(tasks)
        self.worker_id = worker_id
        self.grace = grace

    def hold(self, keys: QueueKeys, items: Sequence[tuple[Job, str]]) -> Op[Any]:
        """The operation that holds ``items`` (job, capability) of queue ``keys``."""
        return holding.hold(keys, items, self.grace, self.worker_id)

    async def seen(self, pumps: Sequence[QueuePump], ahead: float) -> None:
        """Say again what this worker runs on each pump's queue, where its look found no
        held job, and that it says it again within ``ahead`` seconds: the timestamps
        ``publish`` writes, for a few commands instead of about twenty."""
        if self.grace <= 0 or not self.caps:
            return
        await self._on_each(pumps, holding.seen, ahead, "said again")

    async def publish(self, pumps: Sequence[QueuePump], ahead: float) -> None:
        """Say what this worker runs on each pump's queue, and that it says it again
        within ``ahead`` seconds; hand each pump the capabilities of its queue that have
        held jobs."""
        if self.grace <= 0:
            return  # nothing is ever held
        for pump, reply in await self._on_each(pumps, holding.publish, ahead, "published"):
            dead, held = reply
            if dead:
                log.warning(
                    "queue %s: %d held jobs dead-lettered (unknown_task): no worker of the "
                    "queue has run their task at their version for %.0f s",
                    pump.name,
                    dead,
                    self.grace,
                )
            if held:
                pump.unhold_soon(held)

    async def _on_each(
        self, pumps: Sequence[QueuePump], op: Callable[..., Op[Any]], ahead: float, what: str
    ) -> list[tuple[QueuePump, Any]]:
        """Run ``op`` (``holding.seen`` or ``holding.publish``) on each pump's queue at
        once; the pumps whose call succeeded, with its reply (a failure is logged: the
        next look says it again)."""
        replies = await asyncio.gather(
            *(p.queue._run(op(p.queue.keys, self.caps, self.grace, ahead)) for p in pumps),
            return_exceptions=True,
        )
        done: list[tuple[QueuePump, Any]] = []
        for pump, reply in zip(pumps, replies, strict=True):
            if isinstance(reply, BaseException):
                log.debug("queue %s: capabilities not %s: %s", pump.name, what, reply)
            else:
                done.append((pump, reply))
        return done
