"""Waits and signals through a worker (issue 37): a signal before the wait, a wait
before the signal, a timeout raising WaitTimeout in the task, one signal waking every
waiter; App.signal and App.asignal; async and sync tasks."""

from __future__ import annotations

import asyncio

import pytest

import durq
from durable.apps import events, register
from helpers import eventually
from worker.support import running_worker

KINDS = ["async", "sync"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_signal_sent_before_the_wait_is_returned_when_it_is_reached(
    app: durq.App, log: str, kind: str
) -> None:
    app.signal("approve:1", {"by": "ada"})
    with running_worker(app, concurrency=1):
        handle = app.tasks[f"waiter_{kind}"].enqueue(log, "approve:1")
        assert handle.result(timeout=10) == {"got": {"by": "ada"}}
    assert len(events(log, "run")) == 1  # it never parked


@pytest.mark.parametrize("kind", KINDS)
def test_a_wait_before_the_signal_parks_until_it_comes_and_one_signal_wakes_every_waiter(
    app: durq.App, log: str, kind: str, queue_name: str
) -> None:
    queue = app.queue(queue_name)
    with running_worker(app, concurrency=1):
        handles = [app.tasks[f"waiter_{kind}"].enqueue(log, "go") for _ in range(3)]
        eventually(lambda: queue.parked().waiting == 3, 10, lambda: str(queue.stats()))
        assert app.signal("go", 7) == 3
        assert [h.result(timeout=10) for h in handles] == [{"got": 7}] * 3
    assert len(events(log, "run")) == 6  # each ran twice: once to park, once to resume
    assert queue.parked().waiting == 0


@pytest.mark.parametrize("kind", KINDS)
def test_a_wait_that_times_out_raises_wait_timeout_in_the_task(
    app: durq.App, log: str, kind: str
) -> None:
    with running_worker(app, concurrency=1):
        handle = app.tasks[f"waiter_{kind}"].enqueue(log, "never", timeout=0.3)
        assert handle.result(timeout=10) == {"timeout": "never"}


async def test_app_asignal_wakes_the_waiters_as_app_signal_does(
    redis_url: str, queue_name: str, log: str
) -> None:
    app = durq.App(redis_url, default_queue=queue_name, lease=2.0)
    register(app)
    queue = app.queue(queue_name)
    try:
        with running_worker(app, concurrency=1):
            handles = [app.tasks["waiter_async"].enqueue(log, "async-go") for _ in range(2)]
            await asyncio.to_thread(
                eventually, lambda: queue.parked().waiting == 2, 10, lambda: str(queue.stats())
            )
            assert await app.asignal("async-go", {"via": "asignal"}) == 2
            results = [await asyncio.to_thread(h.result, 10) for h in handles]
        assert results == [{"got": {"via": "asignal"}}] * 2
    finally:
        await app.aclose()
        app.close()


def test_a_step_enqueues_a_child_and_waits_for_the_signal_it_sends_when_done(
    redis_url: str, queue_name: str
) -> None:
    app = durq.App(redis_url, default_queue=queue_name, lease=2.0)

    @app.task(name="child")
    def child(n: int) -> None:
        job = durq.current_job()
        assert job is not None
        app.signal(f"child:{job.id}", n * 2, queue=queue_name)

    @app.task(name="parent", result=True)
    async def parent(n: int) -> int:
        job = durq.current_job()
        assert job is not None

        def spawn() -> str:  # an id of its own: running the step again enqueues nothing
            return app.tasks["child"].options(id=f"{job.id}-child").enqueue(n).id

        child_id = await durq.step("spawn", spawn)
        return int(await durq.wait_for(f"child:{child_id}", timeout=30))

    try:
        with running_worker(app, concurrency=2):
            assert app.tasks["parent"].enqueue(21).result(timeout=15) == 42
    finally:
        app.close()
