"""docs/job-control.md: ``cancel`` works on sharded queues too, whichever shard holds the
job, through both front ends (the promise -> test table is in docs/guarantees.md)."""

from __future__ import annotations

import durq
from durq import CancelStatus, JobState


def test_a_sharded_queue_cancels_each_job_in_the_shard_that_holds_it(
    redis_url: str, queue_name: str
) -> None:
    with durq.ShardedQueue(queue_name, redis_url, shards=3) as q:
        pending = [r.id for r in q.enqueue_many(range(6))]
        running = q.dequeue()
        assert running is not None
        pending.remove(running.id)
        results = q.cancel([*pending, running.id, "no-such-job"])
        assert [r.status for r in results] == [CancelStatus.CANCELLED] * 5 + [
            CancelStatus.CANCELLING, CancelStatus.NOT_FOUND
        ]  # fmt: skip
        assert q.dequeue() is None
        q.release(running)
        info = q.job(running.id)
        assert info is not None and info.state is JobState.CANCELLED


async def test_an_async_sharded_queue_cancels_too(redis_url: str, queue_name: str) -> None:
    async with durq.AsyncShardedQueue(queue_name, redis_url, shards=3) as q:
        ids = [r.id for r in await q.enqueue_many(range(4))]
        results = await q.cancel(ids)
        assert [r.status for r in results] == [CancelStatus.CANCELLED] * 4
        assert await q.dequeue() is None
