"""Durable steps through a worker (issue 37): a step runs once per job, a retry replays
the stored results, a step's own retries spend no attempt of the job, a name is unique
within a run; through async and sync tasks."""

from __future__ import annotations

import pytest

import durq
from durable.apps import events, sleeper_async, sleeper_sync
from helpers import eventually
from worker.support import running_worker

KINDS = ["async", "sync"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_retry_replays_completed_steps_without_running_them_again(
    app: durq.App, log: str, kind: str
) -> None:
    with running_worker(app, concurrency=2):
        handle = app.tasks[f"steps_{kind}"].enqueue(log, "j", 4, fail_at=1)
        assert handle.result(timeout=20) == ["j:0", "j:1", "j:2", "j:3"]
    effects = [e["key"] for e in events(log, "effect")]
    assert sorted(effects) == ["j:0", "j:1", "j:2", "j:3"]  # each once, the retry too


@pytest.mark.parametrize("kind", KINDS)
def test_a_sleeping_job_holds_no_worker_and_its_steps_go_with_its_record(
    app: durq.App, log: str, kind: str, queue_name: str
) -> None:
    queue = app.queue(queue_name)
    with running_worker(app, concurrency=1):
        sleeper = app.tasks[f"sleeper_{kind}"].enqueue(log, "z", 1.5)
        eventually(lambda: queue.parked().asleep == 1, 10, lambda: str(queue.stats()))
        # its one slot is free: another job runs while it sleeps
        other = app.tasks[f"steps_{kind}"].enqueue(log, "o", 1)
        assert other.result(timeout=10) == ["o:0"]
        assert len(events(log, "woke")) == 0
        steps = queue.steps(sleeper.id)
        assert [(s.name, s.kind, s.state) for s in steps] == [
            ("before", "step", "done"),
            ("sleep#1", "sleep", "asleep"),
        ]
        assert steps[0].value == "z" and steps[0].tries == 1
        info = queue.job(sleeper.id)
        assert info is not None and info.attempts == 0
        assert sleeper.result(timeout=20) == "z"
    assert len(events(log, "before")) == 1 and len(events(log, "woke")) == 1
    assert queue.parked() == durq.Parked(0, 0)
    assert queue.steps(sleeper.id) == []  # completed: its steps went with its record


def test_a_step_retries_on_its_own_without_spending_the_jobs_attempts(
    app: durq.App, log: str, queue_name: str
) -> None:
    with running_worker(app, concurrency=1):
        handle = app.tasks["flaky_step"].enqueue(log, "f", 2)
        assert handle.result(timeout=20) == "ok"
    assert len(events(log, "try")) == 3
    info = app.queue(queue_name).job(handle.id)
    assert info is not None and info.attempts <= 1


def test_a_step_name_used_twice_in_one_run_dead_letters_the_job_naming_it(
    app: durq.App, log: str, queue_name: str
) -> None:
    queue = app.queue(queue_name)
    with running_worker(app, concurrency=1):
        handle = app.tasks["twice"].enqueue(log)
        eventually(lambda: queue.stats().dead == 1, 10)
    [dead] = queue.dead_letters()
    assert dead.id == handle.id and "'same'" in str(dead.reason)
    assert [e["event"] for e in events(log)] == ["a"]
    assert [s.name for s in queue.steps(handle.id)] == ["same"]  # kept for a replay
    queue.purge(handle.id)
    assert queue.steps(handle.id) == []  # purged: its steps went with it


@pytest.mark.parametrize("kind", KINDS)
def test_a_task_with_a_timeout_sleeps_and_resumes_too(
    redis_url: str, queue_name: str, log: str, kind: str
) -> None:
    timed = durq.App(redis_url, default_queue=queue_name, lease=2.0)
    fn = sleeper_async if kind == "async" else sleeper_sync
    timed.task(name="timed", result=True, timeout=30)(fn)
    try:
        with running_worker(timed, concurrency=1):
            handle = timed.tasks["timed"].enqueue(log, "t", 0.3)
            assert handle.result(timeout=15) == "t"
    finally:
        timed.close()
    assert len(events(log, "before")) == 1 and len(events(log, "woke")) == 1
