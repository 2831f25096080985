"""The bodies of the "jobs that do real work" scenarios, shared by every peer's tasks
and by the bare-body runner (``bench/bare.py``).

    io_redis   one Redis round trip: ``INCR bench:done`` (redis.asyncio in async tasks,
               a blocking redis-py call in sync ones). The INCR is the job's work and
               also its completion count, so these jobs need no probe.
    io_sleep   wait 10 ms (``asyncio.sleep`` / ``time.sleep``), then count the job.
    cpu        burn 2 ms of this thread's CPU time in Python, then count the job.

And the feature rows' bodies (bench/rows.py): ``bulk_write`` (batch consumption: one
pipelined write per call holding every item's row, RPUSH of the rows and INCRBY of the
count, whether the call has one item or a hundred) and ``row`` (an item's payload).

Standard library and redis-py only (it runs in every peer's venv). Clients are made
lazily, one per process (sync; redis-py's pool is thread-safe) or per event loop
(async), and forgotten in a forked child. They use redis-py's defaults, as a new user's
would: with redis-py 8 that is a 5 s socket timeout (each async command then runs its
send under ``asyncio.wait_for``: one more Task per command) and at most 100 connections
per asyncio pool, so an io_redis configuration runs at most 100 async jobs at a time
per process (a 101st concurrent command fails with MaxConnectionsError).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

import probe

KEY_DONE = probe.KEY_DONE
KEY_ROWS = "bench:rows"
SLEEP_S = 0.010
BURN_S = 0.002
SCENARIOS = ("io_redis", "io_sleep", "cpu")

_sync_client: Any = None
_async_clients: dict[int, Any] = {}


def _forget_clients() -> None:
    global _sync_client
    _sync_client = None
    _async_clients.clear()


os.register_at_fork(after_in_child=_forget_clients)


def sync_client() -> Any:
    global _sync_client
    if _sync_client is None:
        import redis

        _sync_client = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])
    return _sync_client


def async_client() -> Any:
    loop = asyncio.get_running_loop()
    client = _async_clients.get(id(loop))
    if client is None:
        import redis.asyncio

        client = redis.asyncio.Redis.from_url(os.environ["BENCH_REDIS_URL"])
        _async_clients[id(loop)] = client
    return client


def burn(seconds: float = BURN_S) -> int:
    """Spin in Python until this thread has used ``seconds`` of CPU. Thread CPU time,
    not wall time: waiting for the GIL or for a core does not count as work done."""
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        for i in range(100):
            x += i * i
    return x


# -- sync bodies (thread and process workers) ------------------------------------------


def io_redis_sync(key: str = KEY_DONE) -> None:
    sync_client().incr(key)


def io_sleep_sync() -> None:
    time.sleep(SLEEP_S)
    probe.done()


def cpu_sync() -> None:
    burn()
    probe.done()


# -- async bodies (asyncio workers) -----------------------------------------------------


async def io_redis_async(key: str = KEY_DONE) -> None:
    await async_client().incr(key)


async def io_sleep_async() -> None:
    await asyncio.sleep(SLEEP_S)
    probe.done()


async def cpu_async() -> None:
    burn()  # an async task that computes blocks its loop: so does a user's
    probe.done()


def row(i: int) -> dict[str, Any]:
    """Item ``i``'s payload: the row a bulk write stores (JSON, about 60 bytes)."""
    return {"id": i, "user": i % 1000, "event": "login", "at": 1_767_225_600 + i}


def bulk_write_sync(rows: list[Any]) -> None:
    """Store every row (one RPUSH) and count them (INCRBY), in one round trip."""
    pipe = sync_client().pipeline(transaction=False)
    pipe.rpush(KEY_ROWS, *(json.dumps(r) for r in rows))
    pipe.incrby(KEY_DONE, len(rows))
    pipe.execute()


async def bulk_write_async(rows: list[Any]) -> None:
    pipe = async_client().pipeline(transaction=False)
    pipe.rpush(KEY_ROWS, *(json.dumps(r) for r in rows))
    pipe.incrby(KEY_DONE, len(rows))
    await pipe.execute()


SYNC = {"io_redis": io_redis_sync, "io_sleep": io_sleep_sync, "cpu": cpu_sync}
ASYNC = {"io_redis": io_redis_async, "io_sleep": io_sleep_async, "cpu": cpu_async}
