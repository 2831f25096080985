"""A short sync task runs on the worker's event-loop thread when it is the only job in
hand, and in a pool thread otherwise (see ``durq.worker.executor.INLINE_BUDGET``)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import durq
from durq.worker.config import ASYNC_CONCURRENCY, SYNC_CONCURRENCY, WorkerConfig, concurrency_for
from durq.worker.executor import INLINE_AFTER
from helpers import eventually
from worker.support import Durq, ExecLog, running_worker


def _threads_of(app: durq.App, task: durq.Task[..., Any], seen: list[str], n: int) -> None:
    with running_worker(app, concurrency=4):
        for i in range(n):  # one at a time: each the only job in hand
            task.enqueue(i)
            eventually(lambda: len(seen) > i, timeout=10)  # noqa: B023 (called at once)


def test_a_short_sync_task_alone_runs_inline_after_a_streak_of_short_runs(
    redis_url: str, queue_name: str
) -> None:
    app = durq.App(url=redis_url)
    seen: list[str] = []

    jobs: list[str | None] = []

    @app.task(queue=queue_name, result=True)
    def short(i: int) -> int:
        job = durq.current_job()  # the job's context, inline as in a thread
        jobs.append(job.id if job is not None else None)
        seen.append(threading.current_thread().name)
        return i * 2

    # a busy machine may make a run slow and put the streak back: room for that
    _threads_of(app, short, seen, INLINE_AFTER + 30)
    assert all(name == "durq-task" for name in seen[:INLINE_AFTER])
    assert seen[-1].startswith("durq-loop")  # the loop's own thread
    assert None not in jobs
    app.close()


def test_an_inline_run_stores_its_result_and_its_failure_as_a_thread_does(
    redis_url: str, queue_name: str
) -> None:
    app = durq.App(url=redis_url)
    seen: list[str] = []

    @app.task(queue=queue_name, result=True, max_attempts=1)
    def half(i: int) -> float:
        seen.append(threading.current_thread().name)
        return 1 / i

    with running_worker(app, concurrency=4):
        for i in range(1, INLINE_AFTER + 30):
            handle = half.enqueue(i)
            assert handle.result(timeout=10) == 1 / i
            if seen[-1].startswith("durq-loop"):
                break
        assert seen[-1].startswith("durq-loop")
        with pytest.raises(durq.JobFailed, match="ZeroDivisionError"):
            half.enqueue(0).result(timeout=10)
    app.close()


def test_a_sync_task_with_a_timeout_or_a_slow_run_stays_in_threads(
    redis_url: str, queue_name: str
) -> None:
    app = durq.App(url=redis_url)
    seen: list[str] = []

    @app.task(queue=queue_name, timeout=30)
    def bounded(i: int) -> None:
        seen.append(threading.current_thread().name)

    @app.task(queue=queue_name)
    def slow(i: int) -> None:
        seen.append(threading.current_thread().name)
        time.sleep(0.005)

    _threads_of(app, bounded, seen, INLINE_AFTER + 2)
    del seen[:]
    _threads_of(app, slow, seen, INLINE_AFTER + 2)
    assert set(seen) == {"durq-task"}
    app.close()


def test_the_default_concurrency_follows_the_kind_of_tasks(redis_url: str) -> None:
    app = durq.App(url=redis_url)

    @app.task
    async def a() -> None: ...

    assert concurrency_for(WorkerConfig(), app.tasks.values()) == ASYNC_CONCURRENCY

    @app.task
    def b() -> None: ...

    assert concurrency_for(WorkerConfig(), app.tasks.values()) == SYNC_CONCURRENCY
    assert concurrency_for(WorkerConfig(concurrency=7), app.tasks.values()) == 7


def test_a_slow_call_of_a_task_that_ran_inline_stalls_neither_its_lease_nor_other_jobs(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    """Issue 30 bug 11, as a new user met it: six 0 ms runs, so the task ran on the
    event loop's thread, then one call longer than the lease (`--lease 3`). The loop
    stalled: no lease extended, the job handed out again and run twice
    (``release ... refused (LEASE_LOST)``), every other job waiting. Now the loop moves
    to another thread once the call has held it 5 ms."""
    worker = durq_cli.worker(redis_url, queue_name, args=("--lease", "3"))
    worker.expect_output("consuming")
    work = app.tasks["work"]
    for i in range(6):  # one at a time, each alone in hand: the streak that lends the loop
        work.enqueue(str(exec_log), f"fast-{i}", 0.0)
        eventually(lambda: exec_log.count("finish") == i + 1, 10)  # noqa: B023
    work.enqueue(str(exec_log), "slow", 4.5)
    eventually(lambda: exec_log.count("start", "slow") == 1, 10)
    for i in range(5):  # while the slow call runs: these start and finish meanwhile
        work.enqueue(str(exec_log), f"other-{i}", 0.0)
    eventually(lambda: exec_log.count("finish", "slow") == 1, 15)
    slow_end = exec_log.events("finish", "slow")[0]["time"]
    others = [e for e in exec_log.events("finish") if e["key"].startswith("other-")]
    assert len(others) == 5 and all(e["time"] < slow_end for e in others)
    eventually(lambda: app.queue(queue_name).stats().completed == 12, 10)
    assert exec_log.count("start", "slow") == 1  # ran once
    output = worker.output()
    assert "LEASE_LOST" not in output and "lease lost" not in output, output
