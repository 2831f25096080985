"""``@app.on(event)``: hooks the worker runs at its start and around each job, where
Celery has signals (the issue's task_prerun, task_postrun, task_failure,
worker_process_init: where Sentry and per-process set-up go)."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

import durq
from worker.support import running_worker


def _wait_dead_or_done(queue: durq.Queue, ids: list[str]) -> None:
    final = {durq.JobState.DEAD, durq.JobState.COMPLETED}
    for _ in range(300):
        infos = [queue.job(i) for i in ids]
        if all(i is None or i.state in final for i in infos):
            return
        time.sleep(0.05)


def test_hooks_see_the_worker_start_and_each_jobs_start_success_retry_and_failure(
    redis_url: str, queue_name: str
) -> None:
    app = durq.App(redis_url, default_queue=queue_name, max_attempts=2, backoff=durq.fixed(0))
    seen: list[tuple[Any, ...]] = []

    @app.task(result=True)
    def add(a: int, b: int) -> int:
        return a + b

    @app.task
    def flaky(n: int) -> None:
        raise ConnectionError(f"upstream down {n}")

    @app.task(dont_retry_on=ValueError)
    def parse(text: str) -> None:
        raise ValueError(text)

    @app.on("worker_start")
    def per_process() -> None:
        seen.append(("worker_start",))

    @app.on("task_start")
    def started(job: durq.Job) -> None:
        current = durq.current_job()
        seen.append(("start", job.task, current is not None and current.id == job.id))

    @app.on("task_success")
    async def succeeded(job: durq.Job, result: Any) -> None:  # an async hook is awaited
        seen.append(("success", job.task, result))

    @app.on("task_retry")
    def retried(job: durq.Job, exc: BaseException) -> None:
        seen.append(("retry", job.task, job.attempt, type(exc).__name__))

    @app.on("task_failure")
    def failed(job: durq.Job, exc: BaseException) -> None:
        seen.append(("failure", job.task, job.attempt, type(exc).__name__, str(exc)))

    ids = [add.enqueue(2, 3).id]
    with running_worker(app):
        ids += [flaky.enqueue(1).id, parse.enqueue("bad").id]
        _wait_dead_or_done(app.queue(queue_name), ids)
    assert seen[0] == ("worker_start",)
    assert ("start", "add", True) in seen and ("success", "add", 5) in seen
    assert ("retry", "flaky", 1, "ConnectionError") in seen
    assert ("failure", "flaky", 2, "ConnectionError", "upstream down 1") in seen
    assert ("failure", "parse", 1, "ValueError", "bad") in seen
    assert [s for s in seen if s[0] == "start"].count(("start", "flaky", True)) == 2
    app.close()


def test_a_hook_that_raises_is_logged_and_changes_nothing(
    redis_url: str, queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    app = durq.App(redis_url, default_queue=queue_name)

    @app.task(result=True)
    def add(a: int, b: int) -> int:
        return a + b

    @app.on("task_start")
    def broken(job: durq.Job) -> None:
        raise RuntimeError("hook bug")

    handle = add.enqueue(1, 2)
    with caplog.at_level(logging.ERROR, logger="durq"), running_worker(app):
        assert handle.result(timeout=10) == 3
    assert any(
        "task_start hook" in r.getMessage() and "broken" in r.getMessage() for r in caplog.records
    )
    app.close()


def test_an_unknown_event_is_refused_at_declaration(redis_url: str) -> None:
    app = durq.App(redis_url)
    with pytest.raises(durq.InvalidArgument, match="no hook event named 'task_prerun'"):
        app.on("task_prerun")(lambda job: None)
    app.close()
