"""Connections that a server restart closed are replaced without an error reaching the
caller, when they sat idle long enough for durq to check them before reuse."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from durq import AsyncQueue, Queue
from durq.dev.server import RedisServer


def test_a_queue_idle_across_a_server_restart_carries_on(
    make_server: Callable[..., RedisServer], queue_name: str
) -> None:
    server = make_server()
    with Queue(queue_name, server.url) as queue:
        queue.enqueue("before")
        server.restart()  # no persistence: the job is gone, the queue's socket too
        time.sleep(1.2)  # longer than durq keeps a connection without checking it
        assert queue.stats().pending == 0
        queue.enqueue("after")
        job = queue.dequeue()
        assert job is not None and job.payload == "after"


async def test_connections_closed_by_the_pool_while_in_use_are_retried(
    make_server: Callable[..., RedisServer], queue_name: str
) -> None:
    # redis-py's pool closes connections from tasks that run later (as it does to its
    # idle connections on a Sentinel switch); calls that were using or opening one at
    # that moment reconnect and retry instead of failing with an AttributeError
    server = make_server()
    # retried for up to a minute, not the default 10 s: a thousand callers reconnecting
    # at once on a busy machine can take longer than that, and how long is not the point
    async with AsyncQueue(queue_name, server.url, enqueue_retry_for=60) as queue:
        pool = queue.client.connection_pool

        async def enqueue(i: int) -> None:
            await queue.enqueue(i, id=f"job-{i}")

        async def disconnect_all() -> None:
            for _ in range(10):
                await pool.disconnect(inuse_connections=True)
                await asyncio.sleep(0.005)

        await asyncio.gather(disconnect_all(), *(enqueue(i) for i in range(1000)))
        assert (await queue.stats()).pending == 1000
