"""The drivers load each script once per connection pool, and again when the server lost
its scripts (restart, failover, SCRIPT FLUSH; the flushes within pipelines are in
test_loader.py). The same for the Functions library: test_functions.py."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from durq import AsyncQueue, Queue
from durq.dev.server import RedisServer
from durq.transport import connection


def _flush(server: RedisServer) -> None:
    client = redis.Redis.from_url(server.url)
    try:
        client.script_flush()
    finally:
        client.close()


def _counts(server: RedisServer) -> tuple[int, int]:
    """(SCRIPT LOAD calls, NOSCRIPT replies) the server has counted so far."""
    client = redis.Redis.from_url(server.url)
    try:
        commands = client.info("commandstats")
        errors = client.info("errorstats")
    finally:
        client.close()
    # Redis 7 and Valkey count subcommands apart; Redis 6.2 counts every SCRIPT call
    loads = commands.get("cmdstat_script|load", commands.get("cmdstat_script", {}))
    return int(loads.get("calls", 0)), int(errors.get("errorstat_NOSCRIPT", {}).get("count", 0))


class _Front:
    """The sync or the async front end behind one awaitable interface."""

    def __init__(self, front: str, server: RedisServer) -> None:
        self.sync = front == "sync"
        self.evalsha = True  # these tests count SCRIPT LOADs
        self.client: Any = (
            connection.sync_client(server.url) if self.sync else connection.async_client(server.url)
        )

    def queue(self, name: str) -> Any:
        queue = (Queue if self.sync else AsyncQueue)(name, client=self.client)
        queue._driver.functions = not self.evalsha
        return queue

    async def call(self, queue: Any, method: str, *args: Any) -> Any:
        result = getattr(queue, method)(*args)
        return result if self.sync else await result

    async def close(self) -> None:
        if self.sync:
            self.client.close()
        else:
            await self.client.aclose()


@pytest.mark.parametrize("front", ["sync", "async"])
async def test_queues_sharing_a_pool_load_each_script_once_and_reload_after_a_flush(
    server: RedisServer, queue_name: str, front: str
) -> None:
    end = _Front(front, server)
    queues = [end.queue(f"{queue_name}-{i}") for i in range(5)]
    try:
        loads, noscripts = _counts(server)
        for queue in queues:
            await end.call(queue, "enqueue", "x")
            assert (await end.call(queue, "dequeue")).payload == "x"
        # one SCRIPT LOAD each for enqueue_single and dequeue, not one per queue
        assert _counts(server) == (loads + 2, noscripts)

        _flush(server)
        loads, noscripts = _counts(server)
        for queue in queues:
            await end.call(queue, "enqueue", "y")
            assert (await end.call(queue, "dequeue")).payload == "y"
        # the first queue meets NOSCRIPT and reloads enqueue_single; the pool forgets
        # every script, so the first dequeue loads its script before sending
        assert _counts(server) == (loads + 2, noscripts + 1)
    finally:
        for queue in queues:
            await end.call(queue, "close" if end.sync else "aclose")
        await end.close()
