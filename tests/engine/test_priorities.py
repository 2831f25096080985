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


async def test_a_lower_priority_job_is_served_after_a_default_one_taken_alone(q: Any) -> None:
    """Found by the model test: a dequeue of one job that took the group's default-
    priority job from its list dropped the group from the rotation although a lower
    priority job was left in its zset, which then never ran (nothing but a new enqueue
    offered the group again)."""
    await q.enqueue("default")
    await q.enqueue("low", priority=-5)
    await q.enqueue("g-default", group="g")
    await q.enqueue("g-low", group="g", priority=-5)
    got = [(await q.dequeue()).payload for _ in range(4)]
    assert sorted(got) == ["default", "g-default", "g-low", "low"]
    assert got.index("low") > got.index("default")
    assert await q.dequeue() is None


async def test_a_stale_default_priority_id_does_not_strand_a_lower_priority_job(q: Any) -> None:
    await q.enqueue("cancelled", id="c")
    await q.enqueue("low", priority=-5)
    await q.cancel("c")  # stays listed until dequeue reaches it
    assert (await q.dequeue()).payload == "low"
