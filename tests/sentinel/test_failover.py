"""``redis+sentinel://`` URLs, and failovers while producers and a worker run: both
resume by themselves; what a failover loses with and without the WAIT durability mode
(see harness.py for the measurement and docs/guarantees.md for the numbers)."""

from __future__ import annotations

import pytest

import durq
from durq import AsyncQueue, Queue
from durq.dev.topology import LocalSentinel
from sentinel.harness import run_failover

RESUME_WITHIN = 10.0  # seconds: detection (1 s down-after) + election + reconnection


async def test_queues_reach_the_primary_through_the_sentinels(
    sentinel_setup: LocalSentinel, queue_name: str
) -> None:
    with Queue(queue_name, sentinel_setup.url) as queue:
        queue.enqueue("from sync", id="a")
    async with AsyncQueue(queue_name, sentinel_setup.url) as queue:
        await queue.enqueue("from async", id="b")
        jobs = await queue.dequeue_many(5)
        assert sorted(j.payload for j in jobs) == ["from async", "from sync"]
        assert await queue.release_many(jobs) == [durq.Outcome.OK] * 2
    primary = sentinel_setup.primary()
    with Queue(queue_name, primary.url) as direct:  # the same data, on the primary
        assert direct.stats().completed == 2


@pytest.mark.slow
async def test_after_a_sentinel_failover_everything_resumes(
    sentinel_setup: LocalSentinel,
) -> None:
    """SENTINEL FAILOVER promotes a replica, then demotes the old primary; writes the
    old primary acknowledged in between are discarded (see docs/guarantees.md), so this
    checks only that producers and the worker carry on by themselves."""
    outcome = await run_failover(sentinel_setup, kill=False, before=1.0, after=0.5)
    print(outcome.line())
    assert not outcome.errors, outcome.errors[:3]
    assert outcome.processed > 0
    assert 0 <= outcome.work_resume_s < RESUME_WITHIN


@pytest.mark.slow
async def test_a_killed_primary_cut_off_from_its_replicas_loses_acknowledged_jobs(
    sentinel_setup: LocalSentinel,
) -> None:
    """Replication is asynchronous: what the primary acknowledged in the last 0.5 s
    before it died, cut off from its replicas, is gone. The producers and the worker
    resume on the promoted replica by themselves."""
    outcome = await run_failover(sentinel_setup, lag=0.5, before=1.0, after=0.5)
    print(outcome.line())
    assert not outcome.errors, outcome.errors[:3]
    assert outcome.lost > 0
    assert 0 <= outcome.produce_resume_s < RESUME_WITHIN
    assert 0 <= outcome.work_resume_s < RESUME_WITHIN


@pytest.mark.slow
async def test_with_wait_the_same_failover_loses_no_acknowledged_job(
    sentinel_setup: LocalSentinel,
) -> None:
    """With Durability(replicas=1) an enqueue returns only once a replica has the job:
    during the cut-off, enqueues wait and then fail with NotDurable (not acknowledged),
    and no acknowledged job is lost."""
    outcome = await run_failover(
        sentinel_setup, durability=durq.Durability(replicas=1), lag=0.5, before=1.0, after=0.5
    )
    print(outcome.line())
    assert not outcome.errors, outcome.errors[:3]
    assert outcome.lost == 0
    assert 0 <= outcome.produce_resume_s < RESUME_WITHIN
