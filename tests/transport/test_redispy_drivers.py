"""A smoke of both drivers on the redis-py installed: each way durq reaches a server (one
server through its pool, a Cluster through its nodes, a Sentinel-managed primary through
durq's Sentinel pool) and both front ends, so that the redis-py releases CI tries
(``make test-redispy``: the oldest and the newest supported) show any surface durq uses
that they changed. Small topologies of their own (no replicas), started once per module."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from durq import AsyncQueue, JobState, Queue
from durq.dev.topology import LocalCluster, LocalSentinel
from durq.transport import redispy
from helpers import default_flavor, require_flavor

KINDS = ("server", "cluster", "sentinel")


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    flavor = default_flavor()
    with LocalCluster(flavor=flavor, replicas=0, binary=require_flavor(flavor)) as local:
        yield local


@pytest.fixture(scope="module")
def sentinel() -> Iterator[LocalSentinel]:
    flavor = default_flavor()
    setup = LocalSentinel(flavor=flavor, replicas=0, sentinels=2, binary=require_flavor(flavor))
    try:
        yield setup.start()
    finally:
        setup.close()


@pytest.fixture(params=KINDS)
def url(request: pytest.FixtureRequest) -> str:
    """The URL of one way to reach a server: ``redis://``, ``redis+cluster://`` or
    ``redis+sentinel://``."""
    if request.param == "server":
        return str(request.getfixturevalue("redis_url"))
    return str(request.getfixturevalue(request.param).url)


def _name() -> str:
    return f"rp-{secrets.token_hex(4)}"


async def _round_trip(queue: Any, run: Any) -> None:
    """Enqueue, dequeue, release and read back through ``queue``, each call awaited by
    ``run`` (the asyncio queue's coroutine, or the blocking queue's value)."""
    first = await run(queue.enqueue({"n": 1}))
    await run(queue.enqueue_many([{"n": 2}, {"n": 3}]))
    jobs = await run(queue.dequeue_many(3))
    assert sorted(job.payload["n"] for job in jobs) == [1, 2, 3]
    await run(queue.release_many(jobs))
    stats = await run(queue.stats())
    assert (stats.pending, stats.active, stats.completed) == (0, 0, 3)
    assert (await run(queue.job(first.id))).state is JobState.COMPLETED


async def test_the_asyncio_driver_runs_a_jobs_way_on_this_redis_py(url: str) -> None:
    async def run(call: Any) -> Any:
        return await call

    async with AsyncQueue(_name(), url, lease=10.0) as queue:
        await _round_trip(queue, run)
        # the connection durq keeps idle between requests, on the pool (not a Cluster's)
        pool = getattr(queue._driver.client, "connection_pool", None)
        if pool is not None:
            assert redispy.IDLE in redispy.attached(pool)


async def test_the_blocking_driver_runs_a_jobs_way_on_this_redis_py(url: str) -> None:
    async def run(value: Any) -> Any:
        return value

    with Queue(_name(), url, lease=10.0) as queue:
        await _round_trip(queue, run)


async def test_a_blocking_wait_and_a_wake_up_cross_threads_on_this_redis_py(url: str) -> None:
    """A dequeue that waits is woken by an enqueue from another thread (the wait and the
    fetch after it on one connection)."""
    with Queue(_name(), url, lease=10.0) as queue:
        waiting = asyncio.get_running_loop().run_in_executor(None, lambda: queue.dequeue(wait=5.0))
        await asyncio.sleep(0.2)
        queue.enqueue({"n": 7})
        job = await asyncio.wait_for(waiting, 30)
        assert job is not None and job.payload == {"n": 7}
        queue.release(job)
