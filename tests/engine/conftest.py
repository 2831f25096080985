"""Fixtures of the engine tests: one queue per test, on each shared server, through
each front end.

Engine tests are written once, as coroutines, against the AsyncQueue API. The ``q``
fixture runs each of them through both front ends: the AsyncQueue itself, and the
generated blocking ``Queue`` behind :class:`Blocking`, which calls the real blocking
methods and only wraps their results in coroutines. The two fronts also take the two ways
of running scripts on a server with Functions: the async one FCALL, the blocking one
EVALSHA (forced), so every engine test checks that both give the same results.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import redis

from durq import AsyncQueue, Queue
from durq.dev.server import RedisServer
from engine.support import Blocking

FRONTS = ("async", "sync")


@pytest.fixture(params=FRONTS)
def front(request: pytest.FixtureRequest) -> str:
    """Which front end the test drives: ``async`` (AsyncQueue) or ``sync`` (Queue)."""
    return str(request.param)


@pytest.fixture
async def make_q(
    front: str, server: RedisServer, queue_name: str
) -> AsyncIterator[Callable[..., Any]]:
    """Factory ``(name=<this test's queue>, **AsyncQueue options) -> queue`` in the
    test's front end, on the test's server; every queue is closed at teardown."""
    made: list[Any] = []

    def make(name: str | None = None, **options: Any) -> Any:
        options.setdefault("lease", 10.0)
        if front == "async":
            queue: Any = AsyncQueue(name or queue_name, server.url, **options)
        else:
            queue = Blocking(Queue(name or queue_name, server.url, **options))
            queue.sync._driver.functions = False
        made.append(queue)
        return queue

    yield make
    for queue in made:
        await queue.aclose()


@pytest.fixture
def q(make_q: Callable[..., Any]) -> Any:
    """The test's queue (lease 10 s, max_attempts 5), in the test's front end."""
    return make_q()


@pytest.fixture
async def local_q(front: str, redis_url: str, queue_name: str) -> AsyncIterator[Any]:
    """The test's queue on the default server only, in the test's front end: for tests
    of what the client checks before it sends anything."""
    if front == "async":
        queue: Any = AsyncQueue(queue_name, redis_url)
    else:
        queue = Blocking(Queue(queue_name, redis_url))
    yield queue
    await queue.aclose()


@pytest.fixture
def raw(server: RedisServer) -> Any:
    """A plain redis-py client on the test's server, to look at or damage durq's keys."""
    client = redis.Redis.from_url(server.url)
    yield client
    client.close()
