"""Dequeue: order, batches, leases, blocking waits."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from durq import JobState, Queue
from durq.dev.server import RedisServer
from engine.support import later, server_time
from helpers import SLACK


async def test_an_empty_queue_hands_out_nothing(q: Any) -> None:
    assert await q.dequeue() is None
    assert await q.dequeue_many(10) == []


async def test_jobs_come_out_in_the_order_they_went_in(q: Any) -> None:
    await q.enqueue_many(range(20))
    out = [(await q.dequeue()).payload for _ in range(20)]
    assert out == list(range(20))
    assert await q.dequeue() is None


async def test_dequeue_many_takes_at_most_what_is_asked_and_what_is_there(q: Any) -> None:
    await q.enqueue_many(range(5))
    assert [j.payload for j in await q.dequeue_many(3)] == [0, 1, 2]
    assert [j.payload for j in await q.dequeue_many(3)] == [3, 4]
    assert await q.dequeue_many(3) == []


async def test_a_dequeued_job_is_active_under_a_lease_from_the_server_clock(
    q: Any, raw: Any
) -> None:
    await q.enqueue("x")
    before = server_time(raw)
    job = await q.dequeue(lease=7)
    after = server_time(raw)
    assert before + 7 - 0.01 <= job.lease_deadline <= after + 7 + 0.01
    info = await q.job(job.id)
    assert info.state is JobState.ACTIVE
    assert info.lease_deadline == job.lease_deadline
    assert before - 0.01 <= info.dequeued_at <= after + 0.01
    assert (await q.stats()).active == 1


async def test_the_queue_default_lease_applies_unless_given(make_q: Any, raw: Any) -> None:
    q = make_q(lease=3)
    await q.enqueue_many([1, 2])
    now = server_time(raw)
    default, given = await q.dequeue(), await q.dequeue(lease=100)
    assert abs(default.lease_deadline - (now + 3)) < 1
    assert abs(given.lease_deadline - (now + 100)) < 1


async def test_every_job_of_a_batch_gets_the_same_lease(q: Any) -> None:
    await q.enqueue_many(range(3))
    jobs = await q.dequeue_many(3, lease=5)
    assert len({j.lease_deadline for j in jobs}) == 1


async def test_a_job_is_handed_out_once_while_its_lease_runs(q: Any) -> None:
    await q.enqueue("only")
    assert await q.dequeue() is not None
    assert await q.dequeue() is None


async def test_a_job_whose_lease_ran_out_is_handed_out_again_with_a_new_token(q: Any) -> None:
    await q.enqueue("x")
    first = await q.dequeue(lease=0.2)
    await asyncio.sleep(0.25)
    second = await q.dequeue()
    assert second.id == first.id
    assert second.token != first.token
    assert (second.attempt, second.deliveries) == (2, 2)
    info = await q.job(second.id)
    assert info.reason["reason"] == "lease_expired"
    assert (await q.stats()).reclaimed == 1


async def test_a_reclaimed_job_goes_ahead_of_the_jobs_that_were_waiting(q: Any) -> None:
    await q.enqueue_many(["first", "second", "third"])
    first = await q.dequeue(lease=0.1)
    await asyncio.sleep(0.15)
    assert [(await q.dequeue()).payload for _ in range(3)] == ["first", "second", "third"]
    assert first.payload == "first"


async def test_a_job_that_keeps_losing_its_lease_is_dead_lettered_after_max_attempts(
    q: Any,
) -> None:
    await q.enqueue("poison", max_attempts=2)
    for _ in range(2):
        assert await q.dequeue(lease=0.05) is not None
        await asyncio.sleep(0.08)
    assert await q.dequeue() is None
    (dead,) = await q.dead_letters()
    assert dead.reason["reason"] == "lease_expired"
    assert dead.attempts == 2
    assert (await q.stats()).dead == 1


async def test_wait_returns_none_after_about_the_wait_when_nothing_comes(q: Any) -> None:
    start = time.monotonic()
    assert await q.dequeue(wait=0.2) is None
    assert 0.19 <= time.monotonic() - start < 0.2 + SLACK


async def test_wait_zero_does_not_block(q: Any) -> None:
    # the first call opens connections (and on a Cluster discovers slots and loads the
    # library); time only the second, which is what "does not block" is about
    assert await q.dequeue(wait=0) is None
    start = time.monotonic()
    assert await q.dequeue(wait=0) is None
    assert time.monotonic() - start < 0.2 + SLACK  # a block would last the whole wait


async def test_a_blocked_dequeue_wakes_about_one_round_trip_after_an_enqueue_elsewhere(
    q: Any, server: RedisServer
) -> None:
    other = Queue(q.name, server.url)
    stamp: list[float] = []

    def produce() -> None:
        stamp.append(time.monotonic())
        other.enqueue("hello")

    try:
        with later(0.15, produce):
            job = await q.dequeue(wait=5)
            woke = time.monotonic()
    finally:
        other.close()
    assert job.payload == "hello"
    # enqueue reply + wake + dequeue: a few round trips (the scheduling noise of a busy
    # machine aside), far from the 5 s the wait would otherwise last
    assert woke - stamp[0] < 0.05 + SLACK


async def test_several_idle_consumers_each_wake_for_their_own_job(
    make_q: Any, server: RedisServer
) -> None:
    consumers = [make_q() for _ in range(3)]
    producer = Queue(consumers[0].name, server.url)

    async def consume(c: Any) -> Any:
        return await c.dequeue(wait=3)

    try:
        with later(0.2, lambda: producer.enqueue_many(["a", "b", "c"])):
            if hasattr(consumers[0], "sync"):  # blocking consumers: one after the other
                got = [await consume(c) for c in consumers]
            else:
                got = await asyncio.gather(*(consume(c) for c in consumers))
    finally:
        producer.close()
    assert sorted(j.payload for j in got) == ["a", "b", "c"]
