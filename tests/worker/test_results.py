"""Results: ``JobHandle.result`` and ``aresult`` return what the task returned, and
raise JobFailed for a job that ended in the dead letters."""

from __future__ import annotations

import time
from typing import Any

import pytest

import durq
from durq import JobFailed
from helpers import SLACK
from worker.support import ExecLog, running_worker


def test_result_waits_for_the_value_the_task_returned(app: durq.App) -> None:
    with running_worker(app):
        handles = [app.tasks["add"].enqueue(i, 100) for i in range(5)]
        assert [h.result(timeout=10) for h in handles] == [100, 101, 102, 103, 104]


def test_result_of_an_async_task(app: durq.App) -> None:
    with running_worker(app):
        assert app.tasks["aadd"].enqueue(2, 3).result(timeout=10) == 5


async def test_aresult_awaits_the_value_the_task_returned(app: durq.App) -> None:
    with running_worker(app):
        handle = await app.tasks["add"].aenqueue(20, 22)
        assert await handle.aresult(timeout=10) == 42
        handle = await app.tasks["aadd"].aenqueue(1, 1)
        assert await handle.aresult(timeout=10) == 2
    await app.aclose()


def test_result_can_be_read_again_until_it_expires(app: durq.App) -> None:
    with running_worker(app):
        handle = app.tasks["add"].enqueue(1, 2)
        assert handle.result(timeout=10) == 3
    assert handle.result(timeout=0.5) == 3


def test_result_raises_job_failed_with_the_reason_of_a_job_failed_by_the_task(
    app: durq.App, exec_log: ExecLog
) -> None:
    with running_worker(app):
        handle = app.tasks["refuses"].enqueue(str(exec_log), "void", "the invoice is void")
        with pytest.raises(JobFailed) as caught:
            handle.result(timeout=10)

    assert caught.value.job_id == handle.id
    assert caught.value.error["reason"] == "failed"
    assert caught.value.error["message"] == "the invoice is void"
    assert "the invoice is void" in str(caught.value)


def test_result_raises_job_failed_with_the_exception_once_attempts_are_exhausted(
    app: durq.App, exec_log: ExecLog
) -> None:
    with running_worker(app):
        handle = app.tasks["explodes"].enqueue(str(exec_log), "boom", "bad row 3")
        with pytest.raises(JobFailed) as caught:
            handle.result(timeout=10)

    error = caught.value.error
    assert (error["type"], error["message"]) == ("builtins.ValueError", "bad row 3")
    assert "_parse_invoice" in error["traceback"]
    assert exec_log.count("start") == 2, "the result waits through the retry"
    assert str(caught.value) == f"job {handle.id} failed: builtins.ValueError: bad row 3"


async def test_aresult_raises_job_failed_for_a_dead_lettered_job(
    app: durq.App, exec_log: ExecLog
) -> None:
    with running_worker(app):
        handle = await app.tasks["refuses"].aenqueue(str(exec_log), "void", "no")
        with pytest.raises(JobFailed, match="failed: failed: no"):
            await handle.aresult(timeout=10)
    await app.aclose()


def test_result_raises_job_failed_for_a_job_with_arguments_its_task_cannot_take(
    app: durq.App, queue_name: str
) -> None:
    queue = app.queue(queue_name)
    with running_worker(app):
        bad = queue.enqueue(["add", [1, 2, 3], {}])  # enqueued by name, unchecked
        handle: durq.JobHandle[Any] = durq.JobHandle(app, queue_name, bad)
        with pytest.raises(JobFailed) as caught:
            handle.result(timeout=10)
    assert caught.value.error["reason"] == "bad_arguments"


def test_result_times_out_when_no_worker_runs_the_job(app: durq.App) -> None:
    handle = app.tasks["add"].enqueue(1, 1)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        handle.result(timeout=0.3)
    assert 0.3 <= time.monotonic() - started < 2.0


def test_result_of_a_task_that_does_not_store_results_is_refused_at_once(
    app: durq.App, exec_log: ExecLog
) -> None:
    handle = app.tasks["work"].enqueue(str(exec_log), "k")
    started = time.monotonic()
    with pytest.raises(durq.InvalidArgument, match=r"task work does not store its result"):
        handle.result(timeout=10)
    assert time.monotonic() - started < 1.0 + SLACK  # not the 10 s of the timeout


def test_a_handle_from_a_stored_id_is_one_call_and_waits_like_the_original(
    app: durq.App, queue_name: str
) -> None:
    add = app.tasks["add"]
    stored = add.enqueue(2, 3).id  # e.g. kept in a database row
    again = add.handle(stored)
    assert (again.id, again.queue) == (stored, queue_name)
    by_app: durq.JobHandle[Any] = app.handle(queue_name, stored)
    with running_worker(app):
        assert again.result(timeout=10) == 5
        assert by_app.result(timeout=10) == 5
    with pytest.raises(durq.InvalidArgument, match="non-empty"):
        add.handle("")
    app.shard("sharded-" + queue_name, 2)
    with pytest.raises(durq.InvalidArgument, match="is sharded"):
        app.handle("sharded-" + queue_name, stored)  # a shard is named by its shard
