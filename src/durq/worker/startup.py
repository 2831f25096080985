"""What a worker learns and registers in Redis before it consumes: the shard counts of
its queues, the subscriptions of the app's topics it consumes, and warnings about the
server's settings."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from redis.exceptions import ConnectionError, TimeoutError

from durq._async.driver import AsyncDriver
from durq._async.queue import AsyncQueue
from durq._async.retry import retrying
from durq._async.topic import AsyncTopic
from durq.keys import NamespaceKeys
from durq.lua.functions import library
from durq.protocol.namespace import shard_counts
from durq.protocol.server_settings import server_warnings
from durq.redaction import redact_url

if TYPE_CHECKING:
    from durq.app.app import App

__all__ = ["check_server", "find_shards", "prepare_processes", "subscribe", "wait_for_redis"]

log = logging.getLogger("durq.worker")


def prepare_processes() -> None:
    """Make once, in the supervisor of ``durq worker -p N`` before it forks, what each
    worker process would otherwise make at its first fetch: durq's Functions library
    (read from its file, or built where none could be written, e.g. under
    PYTHONDONTWRITEBYTECODE: ``durq.lua.library_cache``)."""
    library()


#: the longest pause between two attempts to reach Redis at start
MAX_WAIT_PAUSE = 10.0


async def wait_for_redis(client: Any, url: str, stopping: asyncio.Event) -> bool:
    """Ping Redis until it answers, saying at each attempt where the worker waits and
    why, with pauses from 0.5 s doubling to ``MAX_WAIT_PAUSE``: a worker started
    before its Redis (a deploy, a compose file) starts working as soon as Redis answers
    instead of crashing. Returns False when the worker was stopped while waiting."""
    where = redact_url(url)
    attempt, pause = 0, 0.5
    while True:
        attempt += 1
        try:
            await client.ping()
        except (ConnectionError, TimeoutError, OSError) as exc:
            log.warning(
                "waiting for Redis at %s (attempt %d, next in %g s): %s", where, attempt, pause, exc
            )
        else:
            if attempt > 1:
                log.warning("Redis at %s answers (after %d attempts)", where, attempt)
            return True
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stopping.wait(), pause)
        if stopping.is_set():
            return False
        pause = min(pause * 2, MAX_WAIT_PAUSE)


async def check_server(queue: AsyncQueue) -> None:
    """Say loudly when the server's settings can lose jobs."""
    try:
        found = await queue._run(server_warnings())
    except Exception as exc:  # best effort: the worker runs regardless
        log.debug("could not read the server's settings: %s", exc)
        return
    for level, message in found:
        log.log(logging.WARNING if level == "warning" else logging.INFO, "redis: %s", message)


async def find_shards(app: App, client: Any, queue_names: list[str]) -> None:
    """Learn the shard counts the app does not declare from Redis, where sharded
    queues record them: ``durq worker -q emails`` then consumes every shard."""
    if all(name in app.shards for name in queue_names):
        return
    driver = AsyncDriver(client)

    async def read() -> dict[str, int]:
        return await driver.run(shard_counts(NamespaceKeys(app.namespace)))

    known = await retrying(read, 30.0)
    for name in queue_names:
        if name in known and name not in app.shards:
            app.shard(name, known[name])


async def subscribe(app: App, client: Any, queue_names: list[str]) -> None:
    """Register the subscriptions the worker consumes, so that events published from
    now on reach them."""
    for topic in app.topics.values():
        for name in queue_names:
            subscriber = topic.subscription_of(name)
            if subscriber is None:
                continue
            remote = AsyncTopic(topic.name, client=client, namespace=app.namespace)

            async def subscribe(t: AsyncTopic = remote, s: str = subscriber) -> str:
                return await t.subscribe(s)

            await retrying(subscribe, 30.0)
