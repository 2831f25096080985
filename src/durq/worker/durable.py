"""Durable steps in the worker: the run of each job that makes durable calls
(``durq.app.durable.DurableRun``, made at its first call), and what the worker does with
it when the job's run ends.

A job parked by a sleep or a wait left the worker in the script that parked it: its
outcome is PARKED, and nothing is sent for it (its slot is free for the next job). A job
one of whose durable writes was refused (another worker holds it now) sends nothing
either, whatever the task did after. A run that completed without reaching every name
its earlier runs stored says so in the log (orphans: a deploy removed or renamed them).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from durq._async.queue import AsyncQueue
from durq.app.durable import DurableRun
from durq.models import Job
from durq.worker.capacity import Capacity
from durq.worker.executor import PARKED, Outcome
from durq.worker.joblog import job_fields

__all__ = ["DurableRuns"]

log = logging.getLogger("durq.worker")

_LOST = Outcome("lost")


class DurableRuns:
    """The durable runs of a worker's jobs, by delivery (``durq.app.durable.DurableHost``).

    Args:
        queues: the worker's queues by name (one per shard): a run writes to its job's.
        capacity: the worker's jobs in hand (a run needs its task's kind).
        loop: the worker's loop, where a sync task's durable calls run their Redis calls.
    """

    def __init__(
        self,
        queues: Mapping[str, AsyncQueue],
        capacity: Capacity,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.queues = queues
        self.capacity = capacity
        self.loop = loop
        self.runs: dict[tuple[str, str, str], DurableRun] = {}

    def run_of(self, job: Job) -> DurableRun:
        """The run of ``job``'s delivery, made at its first durable call (from the loop
        or from a sync task's thread: one is made per delivery)."""
        key = (job.queue, job.id, job.token)
        run = self.runs.get(key)
        if run is None:
            delivery = self.capacity.deliveries.get(key)
            task = delivery.task if delivery is not None else None
            is_async = task is not None and task.is_async
            made = DurableRun(self.queues[job.queue], job, self.loop, is_async)
            run = self.runs.setdefault(key, made)  # atomic: one per delivery
        return run

    def parked(self, key: tuple[str, str, str]) -> bool:
        """Whether the job of delivery ``key`` left the worker (parked, or ended by a
        cancel in the script that would have parked it)."""
        run = self.runs.get(key)
        return run is not None and run.parked is not None

    def settle(self, job: Job, name: str, outcome: Outcome) -> Outcome:
        """The outcome to send for ``job`` (task ``name``), whose run just ended with
        ``outcome``; forgets its durable run."""
        run = self.runs.pop((job.queue, job.id, job.token), None)
        if run is None:
            return outcome
        if run.parked is not None:
            return PARKED
        if run.lost:
            return _LOST
        if outcome.kind == "done" and run.stored:
            orphans = sorted(set(run.stored) - run.names)
            if orphans:
                log.info(
                    "job %s (%s) of %s completed without reaching %d stored step(s) of "
                    "earlier runs: %s (renamed or removed by a deploy?)",
                    job.id,
                    name,
                    job.queue,
                    len(orphans),
                    ", ".join(orphans[:10]),
                    extra=job_fields(job, name, outcome),
                )
        return outcome
