"""Priorities: higher first within a group, FIFO within a priority."""

from __future__ import annotations

from typing import Any

from durq import Message


async def test_higher_priorities_are_served_first_and_fifo_within_one(q: Any) -> None:
    await q.enqueue_many(
        [
            Message("low-1", priority=-5),
            Message("mid-1"),
            Message("high-1", priority=10),
            Message("low-2", priority=-5),
            Message("mid-2"),
            Message("high-2", priority=10),
            Message("top", priority=7),
        ]
    )
    got = [j.payload for j in await q.dequeue_many(10)]
    assert got == ["high-1", "high-2", "top", "mid-1", "mid-2", "low-1", "low-2"]


async def test_a_job_carries_its_priority(q: Any) -> None:
    await q.enqueue("x", priority=-10)
    assert (await q.dequeue()).priority == -10


async def test_a_retried_prioritized_job_returns_to_the_head_of_its_priority(q: Any) -> None:
    await q.enqueue_many([Message("a", priority=3), Message("b", priority=3), Message("c")])
    job = await q.dequeue()
    await q.requeue(job, delay=0)
    assert [j.payload for j in await q.dequeue_many(3)] == ["a", "b", "c"]


async def test_priorities_order_jobs_within_a_group_not_across_groups(q: Any) -> None:
    await q.enqueue_many(["a1", "a2"], group="a")
    await q.enqueue_many(["b-high"], group="b", priority=9)
    got = [(await q.dequeue()).payload for _ in range(3)]
    assert got == ["a1", "b-high", "a2"]


async def test_replayed_prioritized_jobs_keep_their_priority(q: Any) -> None:
    await q.enqueue("p", priority=4, max_attempts=1, id="p")
    await q.requeue(await q.dequeue(), reason="x")
    await q.enqueue("plain")
    await q.replay("p")
    assert (await q.dequeue()).payload == "p"
