"""The lease keeper's reading of its extensions' replies."""

from __future__ import annotations

import durq
from durq import Outcome
from durq.metrics import WorkerMetrics
from durq.worker.capacity import Capacity, Delivery
from durq.worker.executor import DONE
from durq.worker.leases import LeaseKeeper


async def test_an_extension_that_finds_its_job_released_by_this_worker_is_no_lost_lease(
    redis_url: str, queue_name: str
) -> None:
    """The keeper's extension and the job's own release race: when the release is
    applied first, the extension is refused, and the job was not handed to anyone."""
    queue = durq.AsyncQueue(queue_name, redis_url)
    try:
        await queue.enqueue_many(["a", "b"])
        finished, running = await queue.dequeue_many(2)
        capacity = Capacity(2)
        capacity.add_queue(queue_name, lambda: None)
        metrics = WorkerMetrics().job_metrics(queue_name, "t")
        items = [Delivery(job, None, DONE, "t", metrics) for job in (finished, running)]
        for delivery in items:
            capacity.occupy(delivery)
        lost: list[str] = []
        keeper = LeaseKeeper(capacity, {queue_name: queue}, [], 10.0,
                             lambda d, why: lost.append(d.job.id))  # fmt: skip
        # the first finished meanwhile: released and out of hand; the second lost its
        # lease for real (released by someone else: refused alike)
        await queue.release(finished)
        capacity.vacate(items[0])
        await queue.release(running)
        statuses = await queue.extend_many([finished, running])
        assert statuses == [Outcome.LEASE_LOST, Outcome.LEASE_LOST]
        keeper.report(items, statuses)
        assert lost == [running.id]
    finally:
        await queue.aclose()
