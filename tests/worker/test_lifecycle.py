"""A worker's life: it starts, keeps the leases of long jobs alive, and stops promptly."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Callable

import durq
from durq.dev.server import RedisServer
from durq.worker import WorkerState
from durq.worker.cancel import cancel_and_wait
from helpers import SLACK, eventually
from worker.apps import build, record
from worker.support import ExecLog, request_stop, running_worker


def test_a_worker_runs_then_stops_and_unregisters(app: durq.App, queue_name: str) -> None:
    with running_worker(app) as worker:
        assert worker.state is WorkerState.RUNNING
        assert worker.queue_names == [queue_name]
        assert app.tasks["add"].enqueue(1, 2).result(timeout=10) == 3
    # leaving the block stopped it (mypy keeps the RUNNING it narrowed to above)
    assert worker.state is WorkerState.STOPPED  # type: ignore[comparison-overlap]
    assert worker.processed == 1


def test_a_worker_stops_promptly_right_after_acknowledging_a_job(app: durq.App) -> None:
    # Regression: a cancellation lost by redis-py's write (asyncio.wait_for on Python
    # 3.11) left the pump's waiter blocked, and every such stop took 10 s.
    for i in range(10):
        with running_worker(app):
            assert app.tasks["add"].enqueue(i, i).result(timeout=10) == 2 * i
            stopping = time.monotonic()
        assert time.monotonic() - stopping < 2.0, f"stop {i} took too long"


def test_a_running_worker_keeps_its_startup_objects_from_the_collector_then_gives_them_back(
    app: durq.App,
) -> None:
    # gc.freeze while running (a speed hint: full collections skip the startup heap);
    # after the stop nothing stays frozen, so an embedding process collects it again
    gc.unfreeze()
    with running_worker(app):
        assert gc.get_freeze_count() > 0
        assert app.tasks["add"].enqueue(2, 3).result(timeout=10) == 5
    assert gc.get_freeze_count() == 0


async def test_cancel_and_wait_ends_a_task_that_swallowed_a_cancellation() -> None:
    async def stubborn() -> None:
        with contextlib.suppress(asyncio.CancelledError):  # lost, as wait_for may on 3.11
            await asyncio.sleep(30)
        await asyncio.sleep(30)

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0.01)
    started = time.monotonic()
    await asyncio.wait_for(cancel_and_wait(task), 5)
    assert task.cancelled()
    assert time.monotonic() - started < 1.0 + SLACK  # not the task's 30 s sleep


def test_a_job_that_runs_longer_than_its_lease_is_not_handed_out_again(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    with running_worker(app, lease=0.3), running_worker(app, lease=0.3):
        app.tasks["work"].enqueue(str(exec_log), "long", 1.5)
        eventually(lambda: exec_log.count("finish") == 1, 10)
        time.sleep(0.5)  # a second delivery would have started by now
    assert exec_log.count("start") == 1
    stats = app.queue(queue_name).stats()
    assert (stats.reclaimed, stats.completed) == (0, 1)


def test_a_worker_consumes_every_queue_of_its_apps_tasks_by_default(
    redis_url: str, queue_name: str, exec_log: ExecLog
) -> None:
    app = durq.App(redis_url)

    @app.task(queue=f"{queue_name}-a")
    def first(log: str) -> None:
        record(log, "finish", "a")

    @app.task(queue=f"{queue_name}-b")
    async def second(log: str) -> None:
        record(log, "finish", "b")

    try:
        with running_worker(app) as worker:
            assert worker.queue_names == [f"{queue_name}-a", f"{queue_name}-b"]
            first.enqueue(str(exec_log))
            second.enqueue(str(exec_log))
            eventually(lambda: exec_log.count("finish") == 2)
    finally:
        app.close()
    assert sorted(exec_log.keys("finish")) == ["a", "b"]


def test_a_job_fetched_while_the_worker_begins_to_stop_is_given_back_unstarted(
    make_server: Callable[..., RedisServer], exec_log: ExecLog, queue_name: str
) -> None:
    # One slot: when `first` ends, its acknowledgement and the fetch of `second` go in
    # one round trip. The server is frozen meanwhile, the worker told to stop, then the
    # server thawed: the reply brings `second` to a worker that no longer takes jobs.
    server = make_server()
    app = build(server.url, default_queue=queue_name)
    work = app.tasks["work"]
    try:
        with running_worker(app, concurrency=1) as worker:
            work.enqueue(str(exec_log), "first", 0.8)
            eventually(lambda: exec_log.count("start", "first") == 1, 10)
            work.enqueue(str(exec_log), "second")
            server.pause()
            try:
                eventually(lambda: exec_log.count("finish", "first") == 1, 5)
                time.sleep(0.2)  # the round trip is sent and waits for the reply
                request_stop(worker)
                eventually(lambda: worker.state is WorkerState.DRAINING, 5)
            finally:
                server.resume()
        assert exec_log.keys("start") == ["first"], "started while stopping"
        queue = app.queue(queue_name)
        assert queue.stats().pending == 1  # given back at once, attempt not counted

        with running_worker(app):
            eventually(lambda: exec_log.count("finish", "second") == 1, 10)
        assert exec_log.events("start", "second")[0]["attempt"] == 1
    finally:
        app.close()
