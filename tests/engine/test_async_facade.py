"""The asyncio and blocking front ends: lifecycle, shared clients, cancellation, and
agreement between the two."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis
import redis.asyncio

from durq import AsyncQueue, JobState, Queue
from durq.dev.server import RedisServer


async def test_an_async_queue_is_an_async_context_manager(
    server: RedisServer, queue_name: str
) -> None:
    async with AsyncQueue(queue_name, server.url) as queue:
        await queue.enqueue("x")
        job = await queue.dequeue()
        assert job is not None and job.payload == "x"


def test_a_queue_is_a_context_manager(server: RedisServer, queue_name: str) -> None:
    with Queue(queue_name, server.url) as queue:
        queue.enqueue("x")
        job = queue.dequeue()
        assert job is not None and job.payload == "x"


async def test_a_client_given_to_an_async_queue_is_left_open(
    server: RedisServer, queue_name: str
) -> None:
    client = redis.asyncio.Redis.from_url(server.url)
    try:
        async with AsyncQueue(queue_name, client=client) as queue:
            await queue.enqueue("x")
        assert await client.ping()
        async with AsyncQueue(queue_name, client=client) as again:
            job = await again.dequeue()
            assert job is not None and job.payload == "x"
    finally:
        await client.aclose()


def test_a_client_given_to_a_queue_is_left_open(server: RedisServer, queue_name: str) -> None:
    client = redis.Redis.from_url(server.url)
    try:
        with Queue(queue_name, client=client) as queue:
            queue.enqueue("x")
        assert client.ping()
    finally:
        client.close()


async def test_jobs_cross_freely_between_the_two_front_ends(
    server: RedisServer, queue_name: str
) -> None:
    with Queue(queue_name, server.url) as sync_queue:
        async with AsyncQueue(queue_name, server.url) as async_queue:
            sync_queue.enqueue({"from": "sync"}, id="s")
            await async_queue.enqueue({"from": "async"}, id="a")
            first = await async_queue.dequeue()
            second = sync_queue.dequeue()
            assert first is not None and second is not None
            assert (first.payload, second.payload) == ({"from": "sync"}, {"from": "async"})
            sync_queue.release(first)  # a job taken by one front end, released by the other
            await async_queue.requeue(second, delay=0)
            info = await async_queue.job("a")
            assert info is not None and info.state is JobState.PENDING


async def test_the_two_front_ends_report_the_same_state(
    server: RedisServer, queue_name: str
) -> None:
    with Queue(queue_name, server.url) as sync_queue:
        async with AsyncQueue(queue_name, server.url) as async_queue:
            await async_queue.enqueue_many(range(3), group="g")
            sync_stats, async_stats = sync_queue.stats(), await async_queue.stats()
            assert {**vars(sync_stats), "server_time": 0} == {**vars(async_stats), "server_time": 0}
            assert sync_queue.groups() == await async_queue.groups()
            assert sync_queue.dead_letters() == await async_queue.dead_letters()


async def test_cancelling_a_blocked_dequeue_loses_nothing_and_the_queue_still_works(
    server: RedisServer, queue_name: str
) -> None:
    async with AsyncQueue(queue_name, server.url) as queue:
        waiter = asyncio.create_task(queue.dequeue(wait=10))
        await asyncio.sleep(0.1)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await queue.enqueue("after")
        job = await queue.dequeue(wait=1)
        assert job is not None and job.payload == "after"
        assert (await queue.stats()).active == 1


async def test_a_timeout_around_a_blocked_dequeue_leaves_the_connection_pool_healthy(
    server: RedisServer, queue_name: str
) -> None:
    async with AsyncQueue(queue_name, server.url) as queue:
        for _ in range(3):
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(queue.dequeue(wait=5), 0.05)
        await queue.enqueue_many(["a", "b"])
        assert [j.payload for j in await queue.dequeue_many(2)] == ["a", "b"]


async def test_many_operations_in_flight_on_one_async_queue_all_complete(
    server: RedisServer, queue_name: str
) -> None:
    async with AsyncQueue(queue_name, server.url) as queue:
        results = await asyncio.gather(*(queue.enqueue(i, id=f"j{i}") for i in range(100)))
        assert all(r.created for r in results)
        taken = await asyncio.gather(*(queue.dequeue() for _ in range(100)))
        jobs = [j for j in taken if j is not None]
        assert sorted(j.payload for j in jobs) == list(range(100))
        await asyncio.gather(*(queue.release(j) for j in jobs))
        assert (await queue.stats()).completed == 100


async def test_an_async_queue_can_run_a_protocol_operation_directly(
    server: RedisServer, queue_name: str
) -> None:
    from durq.protocol import admin

    async with AsyncQueue(queue_name, server.url) as queue:
        await queue.enqueue("x")
        stats: Any = await queue._run(admin.stats(queue.keys))
        assert stats.pending == 1
