"""Helpers of the engine tests (imported as ``engine.support``)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import redis

from durq import Queue, ShardedQueue, Topic


class Blocking:
    """A blocking ``Queue`` seen through the AsyncQueue API: every method is the real
    blocking call, run inline, with its result handed back by a coroutine."""

    def __init__(self, queue: Queue | ShardedQueue | Topic) -> None:
        self.sync = queue

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.sync, name)
        if not callable(attr):
            return attr

        @functools.wraps(attr)
        async def call(*args: Any, **kwargs: Any) -> Any:
            return attr(*args, **kwargs)

        return call

    async def aclose(self) -> None:
        self.sync.close()

    def __repr__(self) -> str:
        return f"<Blocking {self.sync!r}>"


def server_time(client: redis.Redis) -> float:
    """The server's clock in seconds (durq's time base)."""
    secs, micros = client.time()
    return secs + micros / 1e6


def keys_of(client: redis.Redis, queue: Any) -> dict[bytes, bytes]:
    """A snapshot of every key of ``queue``: name -> DUMP (type and value)."""
    names = list(client.scan_iter(match=queue.keys.prefix + "*", count=1000))
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.dump(name)
    return {n: d for n, d in zip(names, pipe.execute(), strict=True) if d is not None}


async def drain(queue: Any, *, lease: float = 10.0) -> list[Any]:
    """Dequeue and release everything ready now; returns the payloads in order."""
    out: list[Any] = []
    while True:
        job = await queue.dequeue(lease=lease)
        if job is None:
            return out
        out.append(job.payload)
        await queue.release(job)


async def expire(client: redis.Redis, queue: Any, job_id: str, *, at_ms: int = 0) -> None:
    """Make the lease on ``job_id`` run out now (its deadline set to ``at_ms``)."""
    assert client.zadd(queue.keys.prefix + "active", {job_id: at_ms}, xx=True, ch=True) == 1


@contextmanager
def later(delay: float, action: Callable[[], object]) -> Iterator[None]:
    """Run ``action`` in a thread after ``delay`` seconds (another client acting while
    the test blocks), unless the block has ended by then; its failure is re-raised."""
    errors: list[BaseException] = []
    done = threading.Event()

    def run() -> None:
        if done.wait(delay):
            return
        try:
            action()
        except BaseException as exc:  # re-raised in the test
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(10)
    if errors:
        raise errors[0]
