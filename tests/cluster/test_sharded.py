"""Sharded queues on the local cluster: shards spread over the primaries, producers
route by group, key or id, consumers and workers drain every shard, stats add up."""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import sys
from collections import Counter

import pytest

import durq
from durq import AsyncShardedQueue, InvalidArgument, Message, Queue, ShardedQueue
from durq.dev.topology import LocalCluster
from durq.worker.config import WorkerConfig
from durq.worker.runner import Worker


@pytest.fixture
def name() -> str:
    return f"s-{secrets.token_hex(4)}"


@pytest.mark.parametrize("shards", [3, 6])
def test_shards_spread_evenly_over_the_primaries(
    cluster: LocalCluster, name: str, shards: int
) -> None:
    with ShardedQueue(name, cluster.url, shards=shards) as queue:
        owners = Counter(cluster.owner(s.keys.prefix)["id"] for s in queue.shards)
    assert len(owners) == 3
    assert set(owners.values()) == {shards // 3}


async def test_jobs_spread_by_id_and_stay_together_by_group_and_key(
    cluster: LocalCluster, name: str
) -> None:
    async with AsyncShardedQueue(name, cluster.url, shards=3) as queue:
        spread = await queue.enqueue_many(range(300))
        per_shard = Counter(r.queue for r in spread)
        assert len(per_shard) == 3 and min(per_shard.values()) > 60
        grouped = await queue.enqueue_many(range(20), group="tenant-1")
        assert len({r.queue for r in grouped}) == 1
        first = await queue.enqueue("a", key="user-7")
        second = await queue.enqueue("b", key="user-7")
        assert second.status is durq.EnqueueStatus.DEDUPLICATED and second.id == first.id
        again = await queue.enqueue_many([Message(i, id=r.id) for i, r in enumerate(spread[:50])])
        assert {r.status for r in again} == {durq.EnqueueStatus.EXISTS}
        stats = await queue.stats()
        assert (stats.name, stats.enqueued, stats.pending, stats.deduplicated) == (
            name, 321, 321, 1,
        )  # fmt: skip


async def test_consumers_drain_every_shard_and_acks_find_their_shard(
    cluster: LocalCluster, name: str
) -> None:
    async with AsyncShardedQueue(name, cluster.url, shards=3, max_attempts=1) as queue:
        await queue.enqueue_many(range(60))
        jobs = await queue.dequeue_many(60, wait=1)
        assert len(jobs) == 60 and len({j.queue for j in jobs}) == 3
        assert await queue.release_many(jobs[:50]) == [durq.Outcome.OK] * 50
        statuses = await queue.requeue_many(jobs[50:], reason="boom")
        assert statuses == [durq.Outcome.DEAD] * 10
        dead = await queue.dead_letters()
        assert len(dead) == 10
        reason = dead[0].reason
        assert reason is not None and reason["message"] == "boom"
        assert await queue.replay([d.id for d in dead]) == 10
        assert len(await queue.dequeue_many(20, wait=1)) == 10
        assert await queue.dequeue(wait=0.2) is None
        stats = await queue.stats()
        assert (stats.completed, stats.dead_lettered, stats.active) == (50, 10, 10)


def test_the_blocking_sharded_queue(cluster: LocalCluster, name: str) -> None:
    with ShardedQueue(name, cluster.url, shards=2) as queue:
        result = queue.enqueue({"x": 1}, group="g")
        job = queue.dequeue(wait=1)
        assert job is not None and job.id == result.id and job.queue == result.queue
        queue.release(job)
        assert queue.stats().completed == 1


def test_the_shard_count_is_recorded_and_enforced(cluster: LocalCluster, name: str) -> None:
    with ShardedQueue(name, cluster.url, shards=3) as queue:
        queue.enqueue(1)
    with (
        ShardedQueue(name, cluster.url, shards=4) as other,
        pytest.raises(InvalidArgument, match="has 3 shards"),
    ):
        other.enqueue(1)
    with Queue(name, cluster.url) as plain, pytest.raises(InvalidArgument, match="3 shards"):
        plain.enqueue(1)


async def test_a_worker_consumes_every_shard_of_an_app_queue(
    cluster: LocalCluster, name: str
) -> None:
    done: list[int] = []
    app = durq.App(cluster.url, default_queue=name)

    @app.task(shards=3)
    async def work(n: int) -> None:
        done.append(n)

    handles = await work.aenqueue_many([(n,) for n in range(150)])
    assert len({h.queue for h in handles}) == 3
    # a worker whose app does not declare the shards finds them in Redis
    bare = durq.App(cluster.url, default_queue=name)
    bare.task(name="work")(work.fn)
    worker = Worker(bare, WorkerConfig(queues=[name], burst=True), handle_signals=False)
    await asyncio.wait_for(worker.run(), 30)
    assert sorted(done) == list(range(150))
    assert sorted(worker.pumps) == [f"{name}~{i}" for i in range(3)]
    assert (await app.asharded_queue(name).stats()).completed == 150
    await app.aclose()
    await bare.aclose()


async def test_a_deep_shard_does_not_starve_the_others(cluster: LocalCluster, name: str) -> None:
    """Each busy pump gets an equal share of the worker's slots."""
    order: list[str] = []
    app = durq.App(cluster.url, default_queue=name, shards={name: 2})

    @app.task
    async def step(group: str) -> None:
        order.append(group)
        await asyncio.sleep(0.01)

    queue = app.asharded_queue(name)
    deep, shallow = "g-deep", "g-shallow"
    while queue.route(Message(0, id="x"), group=shallow) == queue.route(
        Message(0, id="x"), group=deep
    ):
        shallow += "x"
    await step.options(group=deep).aenqueue_many([(deep,)] * 300)
    await step.options(group=shallow).aenqueue_many([(shallow,)] * 20)
    worker = Worker(app, WorkerConfig(concurrency=4, burst=True), handle_signals=False)
    await asyncio.wait_for(worker.run(), 60)
    assert len(order) == 320
    last_shallow = max(i for i, g in enumerate(order) if g == shallow)
    assert last_shallow < 100, f"the shallow shard finished only at {last_shallow}"
    await app.aclose()


def test_durq_stats_adds_up_the_shards(cluster: LocalCluster, name: str) -> None:
    with ShardedQueue(name, cluster.url, shards=3) as queue:
        queue.enqueue_many(range(42))
    shown = subprocess.run(
        [sys.executable, "-m", "durq", "stats", name, "--url", cluster.url, "--no-rate"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    row = next(line for line in shown.splitlines() if line.strip().startswith(name))
    assert row.split()[1] == "42"  # pending, summed over the shards


async def test_a_worker_pauses_every_shard_on_the_other_primaries_for_rate_limited(
    cluster: LocalCluster, name: str
) -> None:
    """RateLimited(scope="queue") in one shard reaches the shards of other primaries
    through the outbox (issue 30, bug 7)."""
    ran: list[int] = []
    app = durq.App(cluster.url, default_queue=name, shards={name: 3})

    @app.task
    async def call(n: int) -> None:
        ran.append(n)
        if n == 0:
            raise durq.RateLimited(60, scope="queue")

    queue = app.asharded_queue(name)
    first = await call.aenqueue(0)
    worker = Worker(app, WorkerConfig(concurrency=2), handle_signals=False)
    task = asyncio.create_task(worker.run())
    try:
        for _ in range(200):
            limits = [await shard.limits() for shard in queue.shards]
            if all(info.paused_until for info in limits):
                break
            await asyncio.sleep(0.05)
        assert all(info.paused_until for info in limits), limits
        others = await call.aenqueue_many([(n,) for n in range(1, 31)])
        assert len({h.queue for h in others} | {first.queue}) == 3
        await asyncio.sleep(1.0)
        assert ran == [0]  # nothing started anywhere during the pause
    finally:
        worker.stop()
        await asyncio.wait_for(task, 30)
        await app.aclose()
