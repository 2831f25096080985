"""Failures: retries after the task's backoff (fixed, exponential), ``durq.Retry`` with
its own delay, ``durq.Fail`` dead-lettering at once, and dead letters that say why."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

import durq
from helpers import SLACK, eventually
from worker.support import ExecLog, running_worker


def _gaps(exec_log: ExecLog, key: str) -> list[float]:
    """Seconds between the starts of consecutive attempts of ``key``."""
    times = [e["time"] for e in exec_log.events("start", key)]
    return [b - a for a, b in itertools.pairwise(times)]


def test_a_failing_job_is_retried_after_its_fixed_backoff_until_it_succeeds(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    with running_worker(app):
        app.tasks["flaky_fixed"].enqueue(str(exec_log), "fixed", 2)
        eventually(lambda: exec_log.count("finish") == 1, 10)

    assert [e["attempt"] for e in exec_log.events("start")] == [1, 2, 3]
    for gap in _gaps(exec_log, "fixed"):
        assert 0.4 <= gap < 0.4 + SLACK
    stats = app.queue(queue_name).stats()
    assert (stats.retried, stats.completed, stats.dead) == (2, 1, 0)


def test_exponential_backoff_doubles_the_delay_after_each_failure(
    app: durq.App, exec_log: ExecLog
) -> None:
    with running_worker(app):
        app.tasks["flaky_exponential"].enqueue(str(exec_log), "exp", 2)
        eventually(lambda: exec_log.count("finish") == 1, 10)

    first, second = _gaps(exec_log, "exp")
    assert 0.25 <= first < 0.25 + SLACK
    assert 0.5 <= second < 0.5 + SLACK


def test_raising_retry_with_a_delay_retries_after_that_delay_and_counts_the_attempt(
    app: durq.App, exec_log: ExecLog
) -> None:
    with running_worker(app):
        app.tasks["asks_retry"].enqueue(str(exec_log), "later", 0.6, 1)
        eventually(lambda: exec_log.count("finish") == 1, 10)

    assert [e["attempt"] for e in exec_log.events("start")] == [1, 2]
    (gap,) = _gaps(exec_log, "later")
    assert 0.6 <= gap < 0.6 + SLACK


def test_a_job_that_keeps_asking_for_retries_is_dead_lettered_when_attempts_run_out(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    queue = app.queue(queue_name)
    with running_worker(app):
        handle = app.tasks["asks_retry"].enqueue(str(exec_log), "never", 0.1, 99)
        eventually(lambda: queue.stats().dead == 1, 10)

    assert exec_log.count("start") == 2  # max_attempts=2
    info = queue.job(handle.id)
    assert info is not None and info.reason is not None
    assert info.reason["reason"] == "retry_requested"
    assert info.reason["message"] == "the upstream is not ready"
    assert info.reason["exhausted"] is True
    assert (info.attempts, info.max_attempts) == (2, 2)


def test_raising_fail_dead_letters_the_job_at_once_with_its_reason(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    queue = app.queue(queue_name)
    with running_worker(app):
        handle = app.tasks["refuses"].enqueue(str(exec_log), "bad", "the invoice is void")
        eventually(lambda: queue.stats().dead == 1, 10)

    assert exec_log.count("start") == 1  # of 5 attempts allowed
    (dead,) = queue.dead_letters()
    assert dead.id == handle.id
    assert dead.reason is not None
    assert (dead.reason["reason"], dead.reason["message"]) == ("failed", "the invoice is void")
    assert (dead.attempts, dead.max_attempts) == (1, 5)
    assert queue.stats().retried == 0


@pytest.mark.parametrize("task", ["explodes", "aexplodes"], ids=["sync", "async"])
def test_a_dead_letter_of_an_exception_carries_its_type_message_and_traceback(
    task: str, app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    queue = app.queue(queue_name)
    with running_worker(app):
        handle = app.tasks[task].enqueue(str(exec_log), "boom", "line 7 is not a number")
        eventually(lambda: queue.stats().dead == 1, 10)

    assert exec_log.count("start") == 2
    info = queue.job(handle.id)
    assert info is not None and info.reason is not None and info.died_at is not None
    reason = info.reason
    assert reason["reason"] == "exception"
    assert reason["type"] == "builtins.ValueError"
    assert reason["message"] == "line 7 is not a number"
    assert reason["exhausted"] is True
    assert reason["attempt"] == 2
    lines = reason["traceback"].rstrip().splitlines()
    # from the task's own frame down, without the worker's frames that led to it
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[1].endswith(f", in {task}") and "apps.py" in lines[1]
    assert "durq/" not in reason["traceback"] and "asyncio" not in reason["traceback"]
    assert lines[-3].endswith("in _parse_invoice")
    assert lines[-1] == "ValueError: line 7 is not a number"


def test_failed_attempts_are_retried_on_the_queue_until_exhausted_without_blocking_others(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    queue = app.queue(queue_name)
    with running_worker(app, concurrency=1):
        app.tasks["flaky_fixed"].enqueue(str(exec_log), "flaky", 2)
        app.tasks["work"].enqueue_many([(str(exec_log), f"ok-{i}") for i in range(5)])
        eventually(lambda: exec_log.count("finish") == 6, 10)

    # the other jobs ran while the flaky one waited out its backoff
    finish_order = exec_log.keys("finish")
    assert finish_order[-1] == "flaky"
    assert queue.stats().size == 0


@pytest.mark.parametrize("max_attempts", [1, 3])
def test_a_job_is_dead_lettered_after_exactly_max_attempts_failures(
    max_attempts: int, app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    flaky = app.tasks["flaky_fixed"]
    queue = app.queue(queue_name)
    message = flaky.message(flaky.call(str(exec_log), "doomed", 99))
    with running_worker(app):
        queue.enqueue_many([replace(message, max_attempts=max_attempts)])
        eventually(lambda: queue.stats().dead == 1, 10)

    assert [e["attempt"] for e in exec_log.events("start")] == list(range(1, max_attempts + 1))
    (dead,) = queue.dead_letters()
    assert dead.reason is not None
    assert dead.reason["type"] == "builtins.RuntimeError"
    assert dead.reason["message"] == f"transient failure {max_attempts}"
