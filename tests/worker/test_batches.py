"""Batch tasks in a worker (``durq.Batch``): a batch starts at max_size or max_wait, the
function is called once with every item, and each item ends its own way (completed,
retried, dead-lettered with its own reason), async and sync, plain and sharded queues."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

import durq
from durq.dev.server import RedisServer
from durq.payloads import result_summary
from helpers import SLACK, eventually
from worker.support import running_worker

#: what a worker's loops send (commandstats also counts the commands scripts call)
_SENT = ("fcall", "fcall_ro", "evalsha", "eval", "bzpopmin", "blpop", "brpop")


def _calls(client: redis.Redis) -> int:
    stats: dict[str, dict[str, int]] = client.info("commandstats")
    return sum(stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in _SENT)


class Calls:
    """What the batch functions saw: the items of each call, and when."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.batches: list[list[durq.Item]] = []
        self.times: list[float] = []

    def add(self, items: list[durq.Item]) -> None:
        with self.lock:
            self.batches.append(list(items))
            self.times.append(time.monotonic())

    def sizes(self) -> list[int]:
        return [len(b) for b in self.batches]

    def values(self) -> list[Any]:
        return [item.args[0] for b in self.batches for item in b]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_batch_task_receives_its_items_in_one_call_and_completes_them(
    bapp: durq.App, queue_name: str, kind: str
) -> None:
    calls = Calls()
    if kind == "sync":

        @bapp.task(queue=queue_name, batch=durq.Batch(max_size=50, max_wait=0.3))
        def store(items: list[durq.Item]) -> None:
            calls.add(items)

    else:

        @bapp.task(queue=queue_name, batch=durq.Batch(max_size=50, max_wait=0.3))
        async def store(items: list[durq.Item]) -> None:
            calls.add(items)

    store.enqueue_many([(n,) for n in range(120)])
    with running_worker(bapp):
        eventually(lambda: len(calls.values()) == 120, 10)
    assert sorted(calls.values()) == list(range(120))
    assert calls.sizes()[:2] == [50, 50]
    assert max(calls.sizes()) == 50
    stats = bapp.queue(queue_name).stats()
    assert stats.completed == 120 and stats.pending == 0 and stats.active == 0
    history = bapp.queue(queue_name).batches()
    assert [r.cause for r in history][-2:] == ["size", "size"]


def test_a_partial_batch_of_seven_flushes_at_max_wait(bapp: durq.App, queue_name: str) -> None:
    calls = Calls()

    @bapp.task(queue=queue_name, batch=durq.Batch(max_size=100, max_wait=0.6))
    def store(items: list[durq.Item]) -> None:
        calls.add(items)

    with running_worker(bapp):
        time.sleep(0.3)  # the worker waits, idle, for a first item
        enqueued = time.monotonic()
        store.enqueue_many([(n,) for n in range(7)])
        eventually(lambda: calls.batches, 10)
    assert calls.sizes() == [7]
    waited = calls.times[0] - enqueued
    assert 0.6 - 0.05 <= waited < 0.6 + SLACK
    assert [(r.size, r.cause) for r in bapp.queue(queue_name).batches()] == [(7, "wait")]


def test_one_bad_item_among_a_hundred_is_retried_then_dead_lettered_with_its_own_reason(
    bapp: durq.App, queue_name: str
) -> None:
    calls = Calls()

    @bapp.task(
        queue=queue_name,
        batch=durq.Batch(max_size=100, max_wait=0.2),
        max_attempts=2,
        backoff=durq.fixed(0.1),
    )
    def store(items: list[durq.Item]) -> None:
        calls.add(items)
        for item in items:
            if item.args[0] == 13:
                item.fail(ValueError(f"row {item.args[0]} is malformed"))

    store.enqueue_many([(n,) for n in range(100)])
    q = bapp.queue(queue_name)
    with running_worker(bapp):
        eventually(lambda: q.stats().dead == 1, 10)
    assert calls.sizes()[0] == 100
    assert calls.values().count(13) == 2  # its two attempts
    assert len([v for v in calls.values() if v != 13]) == 99  # each other item once
    stats = q.stats()
    assert (stats.completed, stats.dead, stats.retried) == (99, 1, 1), stats
    (dead,) = q.dead_letters()
    assert dead.reason is not None
    assert dead.reason["type"] == "builtins.ValueError"
    assert "row 13 is malformed" in dead.reason["message"]


def test_a_batch_that_raises_fails_each_item_by_its_own_attempts(
    bapp: durq.App, queue_name: str
) -> None:
    calls = Calls()

    @bapp.task(
        queue=queue_name,
        batch=durq.Batch(max_size=10, max_wait=0.1),
        max_attempts=3,
        backoff=durq.fixed(0.05),
    )
    async def store(items: list[durq.Item]) -> None:
        calls.add(items)
        if any(item.attempt == 1 for item in items):
            raise RuntimeError("the bulk write failed")

    store.enqueue_many([(n,) for n in range(5)])
    q = bapp.queue(queue_name)
    with running_worker(bapp):
        eventually(lambda: q.stats().completed == 5, 10)
    assert q.stats().dead == 0
    assert sorted(calls.values()) == sorted(list(range(5)) * 2)


def test_a_batch_task_that_keeps_results_stores_one_per_item(
    bapp: durq.App, queue_name: str
) -> None:
    @bapp.task(queue=queue_name, batch=durq.Batch(max_size=10, max_wait=0.2), result=True)
    def double(items: list[durq.Item]) -> list[int]:
        return [item.args[0] * 2 for item in items]

    handles = double.enqueue_many([(n,) for n in range(4)])
    with running_worker(bapp):
        assert [h.result(timeout=10) for h in handles] == [0, 2, 4, 6]
    # each item's result keeps its job's summary, as a plain task's does (durq job show)
    raw = bapp.queue(queue_name).wait_result(handles[1].id, 0)
    assert raw is not None
    summary = result_summary(raw) or {}
    assert (summary["task"], summary["args"], summary["attempt"]) == ("double", [1], 1)
    assert summary["worker"] and summary["started"] >= summary["enqueued"] > 0


def test_a_sharded_batch_task_runs_every_shards_items(bapp: durq.App, queue_name: str) -> None:
    calls = Calls()

    @bapp.task(queue=queue_name, shards=3, batch=durq.Batch(max_size=20, max_wait=0.2))
    def store(items: list[durq.Item]) -> None:
        calls.add(items)

    store.enqueue_many([(n,) for n in range(60)])
    with running_worker(bapp):
        eventually(lambda: len(calls.values()) == 60, 10)
    assert sorted(calls.values()) == list(range(60))


def test_an_item_has_its_id_arguments_attempt_group_and_enqueue_time(
    bapp: durq.App, queue_name: str
) -> None:
    calls = Calls()

    @bapp.task(queue=queue_name, batch=durq.Batch(max_size=5, max_wait=0.1))
    def store(items: list[durq.Item]) -> None:
        calls.add(items)

    before = time.time()
    handle = store.options(group="tenant-7").enqueue({"user": 7}, kind="login")
    with running_worker(bapp):
        eventually(lambda: calls.batches, 10)
    (item,) = calls.batches[0]
    assert item.id == handle.id
    assert item.args == ({"user": 7},) and item.kwargs == {"kind": "login"}
    assert item.attempt == 1 and item.group == "tenant-7"
    assert before - 1 <= item.enqueued_at <= time.time() + 1


# ------------------------------------------------------------------ declaration checks


def test_a_batch_function_that_does_not_take_exactly_one_parameter_fails_at_declaration(
    bapp: durq.App,
) -> None:
    with pytest.raises(durq.InvalidArgument, match="exactly one parameter"):

        @bapp.task(queue="b1", batch=durq.Batch())  # type: ignore[arg-type]
        def two(items: list[durq.Item], extra: int) -> None: ...

    with pytest.raises(durq.InvalidArgument, match="exactly one parameter"):

        @bapp.task(queue="b2", batch=durq.Batch())  # type: ignore[arg-type]
        def none() -> None: ...


def test_a_batch_task_owns_its_queue(bapp: durq.App) -> None:
    @bapp.task(queue="owned", batch=durq.Batch())
    def store(items: list[durq.Item]) -> None: ...

    with pytest.raises(durq.InvalidArgument, match="owned by the batch task 'store'"):

        @bapp.task(queue="owned")
        def other(x: int) -> None: ...

    @bapp.task(queue="shared")
    def plain(x: int) -> None: ...

    with pytest.raises(durq.InvalidArgument, match="owned by the batch task 'late'"):

        @bapp.task(queue="shared", batch=durq.Batch())
        def late(items: list[durq.Item]) -> None: ...


@pytest.mark.parametrize(
    "kwargs",
    [{"max_size": 0}, {"max_size": 1001}, {"max_wait": -1}, {"max_wait": 61}, {"by_group": 1}],
)
def test_a_batch_out_of_its_limits_is_refused_at_declaration(kwargs: dict[str, Any]) -> None:
    with pytest.raises(durq.InvalidArgument):
        durq.Batch(**kwargs)


def test_an_items_arguments_are_checked_at_enqueue_against_its_declared_signature(
    bapp: durq.App, queue_name: str
) -> None:
    def event(user: int, kind: str = "login") -> None: ...

    @bapp.task(queue=queue_name, batch=durq.Batch(item=event))
    def store(items: list[durq.Item]) -> None: ...

    with pytest.raises(durq.InvalidArgument):
        store.enqueue("not", "an", "event")
    with pytest.raises(durq.InvalidArgument):
        store.enqueue(object())
    store.enqueue(7, kind="logout")
    assert bapp.queue(queue_name).stats().pending == 1


def test_items_settled_one_by_one_end_their_own_way_and_the_rest_complete(
    bapp: durq.App, queue_name: str
) -> None:
    calls = Calls()
    seen: set[str] = set()

    @bapp.task(queue=queue_name, batch=durq.Batch(max_size=10, max_wait=0.2), max_attempts=3)
    def store(items: list[durq.Item]) -> None:
        calls.add(items)
        for item in items:
            if item.id in seen:  # (a rate-limited item keeps its attempt)
                continue
            seen.add(item.id)
            if item.args[0] == 1:
                item.retry(delay=0.05)
            elif item.args[0] == 2:
                item.fail(durq.Fail("never valid"))
            elif item.args[0] == 3:
                item.fail(durq.RateLimited(0.05))

    store.enqueue_many([(n,) for n in range(6)])
    q = bapp.queue(queue_name)
    with running_worker(bapp) as worker:
        eventually(lambda: q.stats().completed == 5, 10)
        metrics = worker.metrics.registry
        sizes = metrics.get_sample_value(
            "durq_batch_size_count", {"queue": queue_name, "task": "store", "cause": "wait"}
        )
    assert sizes is not None and sizes >= 2
    assert sorted(calls.values()) == [0, 1, 1, 2, 3, 3, 4, 5]
    (dead,) = q.dead_letters()
    assert dead.reason is not None and dead.reason["message"] == "never valid"
    stats = q.stats()
    assert (stats.completed, stats.dead, stats.retried) == (5, 1, 1), stats


def test_a_batch_task_refuses_the_process_pool_at_declaration(bapp: durq.App) -> None:
    with pytest.raises(durq.InvalidArgument, match="pool='process' is not for batch tasks"):

        @bapp.task(queue="pooled", batch=durq.Batch(), pool="process")
        def store(items: list[durq.Item]) -> None: ...


def test_a_batch_task_cannot_be_a_workflow_step(bapp: durq.App, queue_name: str) -> None:
    @bapp.task(queue=queue_name, batch=durq.Batch())
    def store(items: list[durq.Item]) -> None: ...

    @bapp.task(queue=f"{queue_name}-plain")
    def plain() -> None: ...

    with pytest.raises(durq.InvalidArgument, match="batch task"):
        durq.chain(plain.si(), store.s(1)).enqueue()


def test_a_running_batch_keeps_its_items_leases_and_holds_no_item_beyond_it(
    bapp: durq.App, queue_name: str
) -> None:
    calls = Calls()
    release = threading.Event()

    @bapp.task(queue=queue_name, batch=durq.Batch(max_size=10, max_wait=0.1), lease=0.5)
    def store(items: list[durq.Item]) -> None:
        calls.add(items)
        release.wait(10)

    store.enqueue_many([(n,) for n in range(25)])
    q = bapp.queue(queue_name)
    with running_worker(bapp):
        eventually(lambda: calls.batches, 10)
        time.sleep(1.5)  # three leases: extended in the meantime
        stats = q.stats()
        assert (stats.active, stats.pending) == (10, 15)  # the batch's items only
        assert stats.reclaimed == 0
        release.set()
        eventually(lambda: q.stats().completed == 25, 10)
    assert calls.sizes() == [10, 10, 5]
    assert q.stats().reclaimed == 0


def test_a_batch_task_s_timeout_applies_to_the_whole_call(bapp: durq.App, queue_name: str) -> None:
    @bapp.task(
        queue=queue_name, batch=durq.Batch(max_size=10, max_wait=0.1), timeout=0.3, max_attempts=1
    )
    async def store(items: list[durq.Item]) -> None:
        await asyncio.sleep(5)

    store.enqueue_many([(n,) for n in range(3)])
    q = bapp.queue(queue_name)
    with running_worker(bapp):
        eventually(lambda: q.stats().dead == 3, 10)
    assert {d.reason["reason"] for d in q.dead_letters() if d.reason} == {"timeout"}


def test_an_idle_batch_worker_does_not_poll_while_empty_or_while_a_partial_batch_waits(
    make_server: Callable[..., RedisServer], queue_name: str
) -> None:
    url = make_server().url  # its own server: commandstats counts every client
    app = durq.App(url, default_queue=queue_name)
    calls = Calls()

    @app.task(queue=queue_name, batch=durq.Batch(max_size=100, max_wait=2.0))
    def store(items: list[durq.Item]) -> None:
        calls.add(items)

    client = redis.Redis.from_url(url)
    try:
        with running_worker(app, queues=[queue_name], heartbeat=30):
            time.sleep(0.5)
            before = _calls(client)
            time.sleep(1.0)  # empty
            idle = _calls(client) - before
            store.enqueue(1)
            time.sleep(0.3)
            before = _calls(client)
            time.sleep(1.0)  # a partial batch of one waits for max_wait
            waiting = _calls(client) - before
            eventually(lambda: calls.batches, 5)
    finally:
        client.close()
        app.close()
    assert idle <= 6, f"{idle} commands in 1 s while empty"
    assert waiting <= 6, f"{waiting} commands in 1 s while a partial batch waited"


def test_a_burst_worker_runs_a_batch_tasks_items_then_stops(
    bapp: durq.App, queue_name: str
) -> None:
    calls = Calls()

    @bapp.task(queue=queue_name, batch=durq.Batch(max_size=30, max_wait=0.1))
    def store(items: list[durq.Item]) -> None:
        calls.add(items)

    store.enqueue_many([(n,) for n in range(70)])
    with running_worker(bapp, burst=True) as worker:
        eventually(lambda: worker.state is durq.worker.WorkerState.STOPPED, 10)
    assert sorted(calls.values()) == list(range(70))
    assert bapp.queue(queue_name).stats().completed == 70


def test_each_batchs_settle_goes_with_the_next_batchs_first_fetch_in_one_round_trip(
    bapp: durq.App, queue_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a queue's acknowledgements go with its next fetch: one round trip per batch,
    the settle first (no item of the next batch is fetched before it)."""
    from durq._async.queue import AsyncQueue

    trips: list[list[str]] = []  # the operations of each round trip of the batch pump
    run, run_all = AsyncQueue._run, AsyncQueue._run_all

    def name(op: Any) -> str:  # settle_done: the settle of a batch all done
        called = op.gi_code.co_name if hasattr(op, "gi_code") else repr(op)
        return "settle" if called == "settle_done" else called

    async def spy_run(self: AsyncQueue, op: Any) -> Any:
        trips.append([name(op)])
        return await run(self, op)

    async def spy_run_all(self: AsyncQueue, ops: Any) -> Any:
        trips.append([name(op) for op in ops])
        return await run_all(self, ops)

    monkeypatch.setattr(AsyncQueue, "_run", spy_run)
    monkeypatch.setattr(AsyncQueue, "_run_all", spy_run_all)
    calls = Calls()

    @bapp.task(queue=queue_name, batch=durq.Batch(max_size=30, max_wait=0.1))
    async def store(items: list[durq.Item]) -> None:
        calls.add(items)

    store.enqueue_many([(n,) for n in range(90)])
    with running_worker(bapp, burst=True) as worker:
        eventually(lambda: worker.state is durq.worker.WorkerState.STOPPED, 10)
    assert calls.sizes() == [30, 30, 30]
    assert bapp.queue(queue_name).stats().completed == 90
    batch_trips = [t for t in trips if "settle" in t or "dequeue_batch" in t]
    assert batch_trips[0] == ["dequeue_batch"]
    assert batch_trips[1:] == [["settle", "dequeue_batch"]] * 3  # the last finds none


def test_a_worker_with_the_process_pool_runs_a_sync_batch_task_in_its_own_process(
    bapp: durq.App, queue_name: str
) -> None:
    calls = Calls()

    @bapp.task(queue=queue_name, batch=durq.Batch(max_size=20, max_wait=0.1))
    def store(items: list[durq.Item]) -> None:
        calls.add(items)  # in this process: the list is the test's

    store.enqueue_many([(n,) for n in range(50)])
    with running_worker(bapp, pool="process", concurrency=1):
        eventually(lambda: len(calls.values()) == 50, 15)
    assert sorted(calls.values()) == list(range(50))
