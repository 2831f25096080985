"""Consumers racing on one queue: every job is handed to one holder at a time, and is
completed exactly once."""

from __future__ import annotations

import asyncio
import itertools
import random
import secrets
import threading
import time
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durq import AsyncQueue, LeaseLost, Outcome, Queue
from durq.dev.server import RedisServer


def _consume_in_thread(url: str, name: str, batch: int, out: list[str], stop: Any) -> None:
    with Queue(name, url, lease=30) as queue:
        while not stop.is_set():
            jobs = queue.dequeue_many(batch)
            if not jobs:
                stop.set() if queue.stats().size == 0 else time.sleep(0.001)
                continue
            assert queue.release_many(jobs) == [Outcome.OK] * len(jobs)
            out.extend(j.id for j in jobs)


def _race_threads(url: str, jobs: int, consumers: int, batch: int) -> Counter[str]:
    name = f"t-{secrets.token_hex(5)}"
    with Queue(name, url) as producer:
        ids = {r.id for r in producer.enqueue_many(range(jobs))}
    got: list[list[str]] = [[] for _ in range(consumers)]
    stop = threading.Event()
    threads = [
        threading.Thread(target=_consume_in_thread, args=(url, name, batch, got[i], stop))
        for i in range(consumers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    seen = Counter(i for out in got for i in out)
    assert set(seen) == ids
    return seen


def test_threads_racing_on_one_queue_each_get_distinct_jobs(server: RedisServer) -> None:
    seen = _race_threads(server.url, jobs=400, consumers=6, batch=3)
    assert max(seen.values()) == 1


@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    jobs=st.integers(1, 80),
    consumers=st.integers(2, 5),
    batch=st.integers(1, 7),
)
def test_any_mix_of_consumers_and_batch_sizes_hands_each_job_out_once(
    server: RedisServer, jobs: int, consumers: int, batch: int
) -> None:
    seen = _race_threads(server.url, jobs, consumers, batch)
    assert max(seen.values()) == 1


async def test_asyncio_consumers_sharing_a_queue_each_get_distinct_jobs(
    server: RedisServer, queue_name: str
) -> None:
    async with AsyncQueue(queue_name, server.url) as queue:
        ids = {r.id for r in await queue.enqueue_many(range(300))}

        async def consume(batch: int) -> list[str]:
            out: list[str] = []
            while jobs := await queue.dequeue_many(batch):
                assert await queue.release_many(jobs) == [Outcome.OK] * len(jobs)
                out += [j.id for j in jobs]
            return out

        results = await asyncio.gather(*(consume(b) for b in (1, 2, 3, 5, 8, 1, 2, 4)))
    seen = Counter(i for out in results for i in out)
    assert set(seen) == ids
    assert max(seen.values()) == 1


async def test_consumers_on_separate_connections_wake_and_split_a_burst(
    server: RedisServer, queue_name: str
) -> None:
    queues = [AsyncQueue(queue_name, server.url) for _ in range(5)]
    try:

        async def consume(queue: AsyncQueue) -> list[str]:
            out: list[str] = []
            while job := await queue.dequeue(wait=0.5):
                await queue.release(job)
                out.append(job.id)
            return out

        consumers = [asyncio.create_task(consume(q)) for q in queues]
        await asyncio.sleep(0.1)  # all are blocked now
        ids = {r.id for r in await queues[0].enqueue_many(range(100))}
        results = await asyncio.gather(*consumers)
    finally:
        for queue in queues:
            await queue.aclose()
    seen = Counter(i for out in results for i in out)
    assert set(seen) == ids and max(seen.values()) == 1
    assert sum(1 for out in results if out) >= 2, "only one consumer ever woke"


def test_with_leases_running_out_mid_work_no_two_leases_on_a_job_overlap(
    server: RedisServer, queue_name: str
) -> None:
    """Slow consumers lose leases to others; the leases of one job never overlap in
    server time, and only one holder completes each job."""
    lease = 0.1
    with Queue(queue_name, server.url) as producer:
        ids = {r.id for r in producer.enqueue_many(range(60), max_attempts=50)}
    deliveries: list[tuple[str, int, float]] = []  # id, delivery, lease deadline
    completed: list[str] = []
    lost: list[str] = []
    lock = threading.Lock()

    def consume(seed: int) -> None:
        rnd = random.Random(seed)
        with Queue(queue_name, server.url, lease=lease) as queue:
            idle_since = time.monotonic()
            while time.monotonic() - idle_since < 0.5:
                job = queue.dequeue(wait=0.05)
                if job is None:
                    continue
                idle_since = time.monotonic()
                with lock:
                    deliveries.append((job.id, job.deliveries, job.lease_deadline))
                time.sleep(rnd.choice([0, 0, 0, 0.005, 0.15]))  # sometimes too slow
                try:
                    queue.release(job)
                except LeaseLost:
                    with lock:
                        lost.append(job.id)
                else:
                    with lock:
                        completed.append(job.id)

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert Counter(completed) == Counter(ids)  # each exactly once
    assert lost, "no lease was ever taken over: the test did not test anything"
    by_job: dict[str, list[tuple[int, float]]] = {}
    for job_id, delivery, deadline in deliveries:
        by_job.setdefault(job_id, []).append((delivery, deadline))
    for job_id, seen in by_job.items():
        seen.sort()
        assert [d for d, _ in seen] == list(range(1, len(seen) + 1)), job_id
        for (_, end), (_, next_end) in itertools.pairwise(seen):
            # the next delivery started (next_end - lease) no earlier than this lease ended
            assert next_end - lease >= end - 0.001, job_id


def test_more_concurrent_callers_than_pooled_connections_all_succeed(
    redis_url: str, queue_name: str
) -> None:
    # more coroutines than a redis-py pool holds by default (100): the excess callers
    # wait for a free connection instead of failing with "Too many connections"
    async def main() -> None:
        async with AsyncQueue(queue_name, redis_url) as queue:
            # each waiter holds a connection while it blocks
            waits = [queue.dequeue(wait=0.3) for _ in range(150)]
            assert await asyncio.gather(*waits) == [None] * 150
            made = await asyncio.gather(*(queue.enqueue(i) for i in range(400)))
            assert len({r.id for r in made}) == 400
            assert (await queue.stats()).pending == 400

    asyncio.run(main())
