"""Hooks in the process pool (docs/hooks.md): ``worker_start`` once in each child after
its fork (replacements included), and the ``task_*`` hooks once per job in the child
that runs it, as Celery's ``worker_process_init`` and task signals run in its prefork
children; a hook that raises there is logged and loses no job."""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durq
from durq.worker.pool import ProcessPoolConfig
from helpers import eventually
from worker import pool_app
from worker.apps import record
from worker.support import ExecLog, running_worker


@pytest.fixture
def app(redis_url: str, queue_name: str) -> Iterator[durq.App]:
    """The process pool's test App (worker.pool_app) on the shared server."""
    test_app = pool_app.build(redis_url, default_queue=queue_name)
    yield test_app
    test_app.close()


def _recording_hooks(app: durq.App, log: str) -> None:
    """Hooks that append each call to ``log`` with their process id (``record``), the
    job they were called for and what ``durq.current_job()`` says there."""

    def seen(event: str, job: durq.Job | None, **extra: Any) -> None:
        current = durq.current_job()
        same = job is not None and current is not None and current.id == job.id
        record(log, event, job.task or "?" if job else "-", of=job.id if job else None,
               current=same, **extra)  # fmt: skip

    @app.on("worker_start")
    def started() -> None:
        seen("worker_start", None)

    @app.on("task_start")
    def task_start(job: durq.Job) -> None:
        seen("task_start", job)

    @app.on("task_success")
    async def task_success(job: durq.Job, result: Any) -> None:  # awaited in the child
        seen("task_success", job, result=result)

    @app.on("task_retry")
    def task_retry(job: durq.Job, exc: BaseException) -> None:
        seen("task_retry", job, exc=type(exc).__name__, message=str(exc))

    @app.on("task_failure")
    def task_failure(job: durq.Job, exc: BaseException) -> None:
        seen("task_failure", job, exc=type(exc).__name__, message=str(exc))


def _hook_pids(exec_log: ExecLog, event: str, job_id: str) -> list[int]:
    return [e["pid"] for e in exec_log.events(event) if e["of"] == job_id]


def _ends(exec_log: ExecLog, job_id: str) -> list[dict[str, Any]]:
    """The end hooks called for ``job_id``, in order."""
    ends = ("task_retry", "task_failure", "task_success")
    return [e for e in exec_log.events() if e.get("of") == job_id and e["event"] in ends]


def test_each_hook_runs_once_per_job_in_the_child_that_runs_it_and_worker_start_once_per_child(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    log = str(exec_log)
    _recording_hooks(app, log)
    limits = ProcessPoolConfig(max_jobs_per_child=2, kill_grace=0.5)
    with running_worker(app, concurrency=2, pool="process", process_pool=limits):
        done = app.tasks["whoami"].enqueue_many([(log, f"w{i}") for i in range(6)])
        seen = [h.result(timeout=20) for h in done]
        exploded = app.tasks["explodes"].enqueue(log, "x", "bad input")
        hung = app.tasks["hangs"].enqueue(log, "h")  # timeout 1 s: TimeLimitExceeded
        swallowed = app.tasks["swallows_time_limit"].enqueue(log, "s")  # and returns
        queue = app.queue(queue_name)
        eventually(lambda: queue.stats().dead == 3, 20, "the three failing jobs dead")
        eventually(lambda: exec_log.count("task_failure") == 3, 5, "their failure hooks")
        info = queue.job(swallowed.id)
    # a task that caught TimeLimitExceeded and returned timed out all the same
    assert info is not None and info.reason is not None
    assert info.reason["reason"] == "timeout"
    assert [(e["event"], e["exc"]) for e in _ends(exec_log, swallowed.id)] == [
        ("task_failure", "TimeLimitExceeded")
    ]
    assert all(e["current"] for e in exec_log.events() if e["event"].startswith("task_"))
    for s, handle in zip(seen, done, strict=True):  # in the child that ran the job
        assert _hook_pids(exec_log, "task_start", handle.id) == [s["pid"]]
        assert _hook_pids(exec_log, "task_success", handle.id) == [s["pid"]]
    assert {e["result"]["id"] for e in exec_log.events("task_success")} == {h.id for h in done}
    # two attempts each: a retry hook, then a failure hook, each in its attempt's child
    for handle, key, exc in ((exploded, "x", "ValueError"), (hung, "h", "TimeLimitExceeded")):
        runs = [e["pid"] for e in exec_log.events("start", key)]
        assert _hook_pids(exec_log, "task_start", handle.id) == runs
        assert [(e["event"], e["exc"], e["pid"]) for e in _ends(exec_log, handle.id)] == [
            ("task_retry", exc, runs[0]),
            ("task_failure", exc, runs[1]),
        ]
    # worker_start: once in the worker, and once in each child, before its first job
    starts = exec_log.events("worker_start")
    per_process = Counter(e["pid"] for e in starts)
    assert set(per_process.values()) == {1}
    assert os.getpid() in per_process
    children = set(per_process) - {os.getpid()}
    job_pids = {e["pid"] for e in exec_log.events("task_start")}
    assert job_pids <= children
    assert len(job_pids) >= 4  # recycled after two jobs: the replacements ran it too
    first_job = {pid: min(e["time"] for e in exec_log.events("task_start") if e["pid"] == pid)
                 for pid in job_pids}  # fmt: skip
    assert all(e["time"] <= first_job[e["pid"]] for e in starts if e["pid"] in job_pids)


def test_a_job_whose_child_died_running_it_gets_its_end_hook_once_from_the_worker(
    app: durq.App, exec_log: ExecLog, queue_name: str
) -> None:
    """``hangs_hard`` is killed at its hard limit on each attempt; ``aborts`` dies of
    SIGABRT on its first delivery and succeeds on the next."""
    log = str(exec_log)
    _recording_hooks(app, log)
    limits = ProcessPoolConfig(kill_grace=0.5)
    with running_worker(app, concurrency=2, pool="process", process_pool=limits):
        hung = app.tasks["hangs_hard"].enqueue(log, "h")
        aborted = app.tasks["aborts"].enqueue(log, "a")
        queue = app.queue(queue_name)
        eventually(lambda: (queue.stats().dead, queue.stats().completed) == (1, 1), 20)
        eventually(lambda: exec_log.count("task_failure") == 1, 5, "the failure hook")
    worker = os.getpid()
    for handle, key in ((hung, "h"), (aborted, "a")):  # task_start: in each attempt's child
        runs = [e["pid"] for e in exec_log.events("start", key)]
        assert len(runs) == 2 and worker not in runs
        assert _hook_pids(exec_log, "task_start", handle.id) == runs
    ends = _ends(exec_log, hung.id)
    assert [(e["event"], e["exc"], e["pid"]) for e in ends] == [
        ("task_retry", "TimeLimitExceeded", worker),
        ("task_failure", "TimeLimitExceeded", worker),
    ]
    assert "killed with SIGKILL 0.5 s later" in ends[0]["message"]
    ends = _ends(exec_log, aborted.id)
    runs = [e["pid"] for e in exec_log.events("start", "a")]
    assert [(e["event"], e.get("exc"), e["pid"]) for e in ends] == [
        ("task_retry", "ChildDied", worker),
        ("task_success", None, runs[1]),
    ]
    assert "died of SIGABRT" in ends[0]["message"]


def test_a_hook_that_raises_in_a_child_is_logged_and_loses_no_job(
    app: durq.App, exec_log: ExecLog, tmp_path: Path
) -> None:
    log = str(exec_log)

    @app.on("worker_start")
    def broken_start() -> None:
        raise RuntimeError("set-up bug")

    @app.on("task_start")
    def broken(job: durq.Job) -> None:
        raise RuntimeError("hook bug")

    @app.on("task_success")
    def later(job: durq.Job, result: Any) -> None:
        record(log, "task_success", job.id)

    # the children inherit this handler (forked from the test process): their records
    handler = logging.FileHandler(tmp_path / "children.log")
    logger = logging.getLogger("durq.worker")
    logger.addHandler(handler)
    try:
        with running_worker(app, concurrency=1, pool="process"):
            handle = app.tasks["whoami"].enqueue(log, "a")
            seen = handle.result(timeout=10)
    finally:
        logger.removeHandler(handler)
        handler.close()
    assert seen["pid"] != os.getpid() and seen["attempt"] == 1
    assert exec_log.keys("task_success") == [handle.id]  # the next hook ran
    text = (tmp_path / "children.log").read_text()
    assert "task_start hook test_a_hook_that_raises" in text and "broken raised" in text
    assert "worker_start hook" in text and "broken_start raised" in text
