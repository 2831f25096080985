"""Fencing: a lease token taken over by another delivery is refused, and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from durq import JobNotFound, JobState, LeaseLost, Outcome
from engine.support import expire, keys_of


@pytest.fixture
async def taken_over(q: Any, raw: Any) -> tuple[Any, Any]:
    """A job whose first holder's lease ran out and which was handed to a second one."""
    await q.enqueue("work")
    first = await q.dequeue()
    await expire(raw, q, first.id)
    second = await q.dequeue()
    assert second.id == first.id
    return first, second


async def _unchanged(q: Any, raw: Any, action: Any) -> None:
    before = keys_of(raw, q)
    with pytest.raises(LeaseLost) as caught:
        await action
    assert caught.value.job_id in str(caught.value)
    assert keys_of(raw, q) == before


async def test_a_late_release_after_takeover_raises_lease_lost(
    q: Any, raw: Any, taken_over: tuple[Any, Any]
) -> None:
    first, second = taken_over
    await _unchanged(q, raw, q.release(first))
    await q.release(second)  # the current holder is unaffected


async def test_a_late_requeue_after_takeover_raises_lease_lost(
    q: Any, raw: Any, taken_over: tuple[Any, Any]
) -> None:
    first, second = taken_over
    await _unchanged(q, raw, q.requeue(first, reason="late"))
    await _unchanged(q, raw, q.requeue(first, dead=True))
    assert (await q.job(second.id)).state is JobState.ACTIVE


async def test_a_late_extend_after_takeover_raises_lease_lost(
    q: Any, raw: Any, taken_over: tuple[Any, Any]
) -> None:
    first, second = taken_over
    await _unchanged(q, raw, q.extend(first, lease=60))
    assert (await q.job(second.id)).lease_deadline == pytest.approx(second.lease_deadline)


async def test_a_late_defer_after_takeover_raises_lease_lost(
    q: Any, raw: Any, taken_over: tuple[Any, Any]
) -> None:
    first, _ = taken_over
    await _unchanged(q, raw, q.defer(first, 0))
    await _unchanged(q, raw, q.defer(first, 30))


async def test_the_batch_forms_report_lease_lost_per_job(
    q: Any, taken_over: tuple[Any, Any]
) -> None:
    first, second = taken_over
    assert await q.extend_many([first, second]) == [Outcome.LEASE_LOST, Outcome.OK]
    assert await q.defer_many([first]) == [Outcome.LEASE_LOST]
    assert await q.requeue_many([first], delay=0) == [Outcome.LEASE_LOST]
    assert await q.release_many([first, second]) == [Outcome.LEASE_LOST, Outcome.OK]


async def test_a_late_release_before_anyone_else_took_the_job_still_works(q: Any, raw: Any) -> None:
    await q.enqueue("slow")
    job = await q.dequeue()
    await expire(raw, q, job.id, at_ms=1)  # ran out, but no dequeue has reclaimed it
    await q.release(job)
    assert await q.dequeue() is None
    assert (await q.stats()).completed == 1


async def test_a_late_extend_before_anyone_else_took_the_job_keeps_it(q: Any, raw: Any) -> None:
    await q.enqueue("slow")
    job = await q.dequeue()
    await expire(raw, q, job.id)
    deadline = await q.extend(job, lease=30)
    assert await q.dequeue() is None
    assert (await q.job(job.id)).lease_deadline == pytest.approx(deadline)
    await q.release(job)


async def test_a_second_release_of_the_same_delivery_raises_lease_lost(q: Any) -> None:
    await q.enqueue("once")
    job = await q.dequeue()
    await q.release(job)
    with pytest.raises(LeaseLost):
        await q.release(job)


async def test_releasing_a_requeued_job_with_its_old_token_raises_lease_lost(q: Any) -> None:
    await q.enqueue("x")
    job = await q.dequeue()
    await q.requeue(job, delay=0)
    with pytest.raises(LeaseLost):
        await q.release(job)
    again = await q.dequeue()
    await q.release(again)


async def test_the_same_job_twice_in_one_release_batch_is_released_once(q: Any) -> None:
    await q.enqueue("x")
    job = await q.dequeue()
    assert await q.release_many([job, job]) == [Outcome.OK, Outcome.LEASE_LOST]
    assert (await q.stats()).completed == 1


async def test_a_job_that_was_never_there_is_not_found(q: Any) -> None:
    class Ghost:
        id = "no-such-job"
        token = "1.1"

    for action in (q.release(Ghost()), q.extend(Ghost()), q.defer(Ghost())):
        with pytest.raises(JobNotFound, match="no-such-job"):
            await action
    assert await q.release_many([Ghost()]) == [Outcome.NOT_FOUND]
