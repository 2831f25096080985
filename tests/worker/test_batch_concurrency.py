"""Batches in flight (``durq.Batch(concurrency=N)``): a worker process runs up to N
batches of a batch task at once per queue (or shard), each formed, run and settled on
its own; no item is leased beyond them; the drain finishes them or gives their items
back."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

import durq
from durq.metrics import WorkerMetrics
from durq.worker.batches import BatchPump
from durq.worker.executor import Executor
from helpers import eventually
from worker.support import running_worker


class Flight:
    """What the batch functions saw: each call's items, and how many ran at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.batches: list[list[Any]] = []
        self.attempts: list[int] = []  # of every item, in the order of the calls
        self.running = 0
        self.peak = 0

    def enter(self, items: list[durq.Item]) -> None:
        with self.lock:
            self.batches.append([item.args[0] for item in items])
            self.attempts += [item.attempt for item in items]
            self.running += 1
            self.peak = max(self.peak, self.running)

    def leave(self) -> None:
        with self.lock:
            self.running -= 1

    def values(self) -> list[Any]:
        with self.lock:
            return [v for batch in self.batches for v in batch]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_worker_runs_up_to_concurrency_batches_at_once_and_leases_nothing_beyond_them(
    bapp: durq.App, queue_name: str, kind: str
) -> None:
    flight = Flight()
    release = threading.Event()  # the first three calls block until the test has looked
    spec = durq.Batch(max_size=10, max_wait=0.1, concurrency=3)
    if kind == "sync":

        @bapp.task(queue=queue_name, batch=spec)
        def store(items: list[durq.Item]) -> None:
            flight.enter(items)
            try:
                if len(flight.batches) <= 3:
                    release.wait(10)
            finally:
                flight.leave()

    else:

        @bapp.task(queue=queue_name, batch=spec)
        async def store(items: list[durq.Item]) -> None:
            flight.enter(items)
            try:
                if len(flight.batches) <= 3:
                    await asyncio.to_thread(release.wait, 10)
            finally:
                flight.leave()

    store.enqueue_many([(n,) for n in range(45)])
    q = bapp.queue(queue_name)
    with running_worker(bapp, concurrency=1) as worker:  # the batches need no job slot
        try:
            eventually(lambda: flight.running == 3, 10)
            time.sleep(0.3)  # a fourth batch would have formed by now
            stats = q.stats()
            assert (stats.active, stats.pending) == (30, 15)  # three batches' items only
            assert len(worker.batch_pumps[queue_name].holding) == 30  # jobs in hand
            assert flight.running == 3
        finally:
            release.set()
        eventually(lambda: q.stats().completed == 45, 10)
    assert flight.peak == 3
    assert all(len(batch) <= 10 for batch in flight.batches)
    assert sorted(flight.values()) == list(range(45))  # every item once
    stats = q.stats()
    assert (stats.completed, stats.pending, stats.active, stats.dead) == (45, 0, 0, 0)
    assert stats.reclaimed == 0


def test_a_sharded_batch_task_runs_concurrency_batches_per_shard(
    bapp: durq.App, queue_name: str
) -> None:
    flight = Flight()
    release = threading.Event()

    spec = durq.Batch(max_size=5, max_wait=0.1, concurrency=2)

    @bapp.task(queue=queue_name, shards=2, batch=spec)
    async def store(items: list[durq.Item]) -> None:
        flight.enter(items)
        try:
            await asyncio.to_thread(release.wait, 10)
        finally:
            flight.leave()

    # each shard gets its items by key: enough on each for two batches
    store.enqueue_many([(n,) for n in range(80)])
    with running_worker(bapp) as worker:
        try:
            eventually(lambda: flight.running == 4, 10)
            time.sleep(0.3)
            assert flight.running == 4
            held = sum(len(p.holding) for p in worker.batch_pumps.values())
            assert held == 20
        finally:
            release.set()
        eventually(lambda: len(flight.values()) == 80, 15)
    assert flight.peak == 4
    assert sorted(flight.values()) == list(range(80))


def test_a_draining_worker_finishes_its_batches_in_flight_or_gives_their_items_back(
    bapp: durq.App, queue_name: str
) -> None:
    flight = Flight()
    slow = {"on": True}

    @bapp.task(queue=queue_name, batch=durq.Batch(max_size=5, max_wait=0.1, concurrency=2))
    async def store(items: list[durq.Item]) -> None:
        flight.enter(items)
        try:
            # the batch of item 0 ends within the grace, the other would not
            if slow["on"] and 0 not in [item.args[0] for item in items]:
                await asyncio.sleep(30)
            else:
                await asyncio.sleep(0.3)
        finally:
            flight.leave()

    store.enqueue_many([(n,) for n in range(10)])
    q = bapp.queue(queue_name)
    with running_worker(bapp, grace=1.5):
        eventually(lambda: flight.running == 2, 10)
    # stopped: one batch finished, the other's items given back, none leased
    stats = q.stats()
    assert (stats.completed, stats.pending, stats.active, stats.dead) == (5, 5, 0, 0)
    finished = set(flight.batches[0] if 0 in flight.batches[0] else flight.batches[1])
    slow["on"] = False
    with running_worker(bapp):
        eventually(lambda: q.stats().completed == 10, 10)
    again = flight.values()[10:]
    assert sorted(again) == sorted(set(range(10)) - finished)  # only those given back
    assert flight.attempts[10:] == [1] * 5  # given back without counting an attempt
    assert q.stats().dead == 0


def test_a_batch_given_back_before_its_function_starts_returns_every_items_attempt(
    bapp: durq.App, queue_name: str, redis_url: str
) -> None:
    # a formed batch gives the loop a few turns before it starts (worker.batches): a
    # drain that gives items back in those turns returns each item's attempt, as it would
    # while the function ran
    started: list[Any] = []

    @bapp.task(queue=queue_name, batch=durq.Batch(max_size=5))
    async def store(items: list[durq.Item]) -> None:
        started.append(items)

    store.enqueue_many([(n,) for n in range(3)])
    q = bapp.queue(queue_name)
    jobs = q.dequeue_many(3)

    async def give_back_at_once() -> None:
        queue = durq.AsyncQueue(queue_name, redis_url)
        pump = BatchPump(queue, store, Executor(bapp, threads=1), WorkerMetrics(), lease=30.0)
        lane = pump.lanes[0]
        runner = asyncio.create_task(pump._batch(lane, jobs, "size"))
        await asyncio.sleep(0)  # the batch has begun its turns
        pump.giving_back = True
        runner.cancel()
        await runner
        assert lane.unsettled is not None
        await pump._settle(lane, lane.unsettled)
        await queue.aclose()

    asyncio.run(give_back_at_once())
    assert started == []
    stats = q.stats()
    assert (stats.pending, stats.active, stats.dead) == (3, 0, 0)
    assert [job.attempt for job in q.dequeue_many(3)] == [1, 1, 1]


def test_under_a_group_limit_of_one_two_batches_of_a_group_never_run_at_once(
    bapp: durq.App, queue_name: str
) -> None:
    running: list[str] = []  # the groups of the batches running now
    overlaps: list[list[str]] = []  # what ran at once, each time a batch started
    lock = threading.Lock()
    spec = durq.Batch(max_size=5, max_wait=0.1, by_group=True, concurrency=3)

    @bapp.task(queue=queue_name, batch=spec)
    async def store(items: list[durq.Item]) -> None:
        (group,) = {item.group for item in items}
        with lock:
            running.append(group or "")
            overlaps.append(list(running))
        try:
            await asyncio.sleep(0.2)
        finally:
            with lock:
                running.remove(group or "")

    q = bapp.queue(queue_name)
    q.configure(group_limit=1)  # each batch of a group is one holder of its one slot
    for group in ("a", "b"):
        store.options(group=group).enqueue_many([(n,) for n in range(15)])
    with running_worker(bapp):
        eventually(lambda: q.stats().completed == 30, 15)
    assert all(len(now) == len(set(now)) for now in overlaps), overlaps
    assert max(len(now) for now in overlaps) <= 2  # two groups: two batches at most


@pytest.mark.parametrize("concurrency", [0, 65, -1, True, 2.0, "2"])
def test_a_batch_concurrency_out_of_its_limits_is_refused_at_declaration(
    concurrency: Any,
) -> None:
    with pytest.raises(durq.InvalidArgument, match="concurrency"):
        durq.Batch(concurrency=concurrency)
