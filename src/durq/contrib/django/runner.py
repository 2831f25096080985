"""The worker side: the one durq task that runs Django tasks.

Every Django job calls the durq task ``django`` with ``(import path, args, kwargs,
meta)``. In ``manage.py durq_worker`` it runs in one of the worker's threads: it closes
database connections that went stale (as Django does around a request), looks the
Django task up among the project's (``durq.contrib.django.known``: a path from Redis is
never imported), sends ``task_started``, runs it, sends ``task_finished``, and returns
what ``get_result`` needs. An exception is re-raised for durq, which retries the job or, once
its attempts are spent, moves it to the dead letters (the task is then FAILED).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from django.db import close_old_connections

import durq
from durq.contrib.django.compat import (
    TaskContext,
    TaskResult,
    TaskResultStatus,
    normalize_json,
    task_backends,
    task_finished,
    task_started,
)
from durq.contrib.django.known import known_task
from durq.contrib.django.state import Attempt, Outcome, error_of, now, task_errors, to_datetime
from durq.contrib.django.task import DurqTask

__all__ = ["TASK_NAME", "call_of", "log_name", "restore", "run_django_task", "worker_id"]

TASK_NAME = "django"
"""The name of the durq task every Django job calls."""

worker_id = f"{socket.gethostname()}:{os.getpid()}"
"""This process's id in ``TaskResult.worker_ids`` (durq_worker sets its durq worker id)."""

log = logging.getLogger("durq.contrib.django")


def call_of(payload: Any) -> tuple[str, list[Any], dict[str, Any], dict[str, Any]]:
    """The Django call in a job's payload: import path, args, kwargs and meta."""
    if isinstance(payload, list) and len(payload) >= 2 and payload[0] == TASK_NAME:
        call = payload[1]
        if (
            isinstance(call, list)
            and len(call) == 4
            and isinstance(call[0], str)
            and isinstance(call[1], list)
            and isinstance(call[2], dict)
            and isinstance(call[3], dict)
        ):
            return call[0], call[1], call[2], call[3]
    raise ValueError("not a Django task job")


def log_name(args: list[Any]) -> str:
    """The name the worker's log lines give a Django job: its task's import path (from
    Redis: shortened, never imported here)."""
    path = args[0] if args else None
    return path[:200] if isinstance(path, str) else TASK_NAME


def restore(task: Any, meta: Mapping[str, Any]) -> Any:
    """``task`` with the options a job was enqueued with."""
    run_after = meta.get("run_after")
    changes: dict[str, Any] = {
        "priority": meta.get("priority", task.priority),
        "queue_name": meta.get("queue_name", task.queue_name),
        "backend": meta.get("backend", task.backend),
        "run_after": datetime.fromisoformat(run_after) if run_after else None,
    }
    if isinstance(task, DurqTask):
        changes.update({k: meta.get(k) for k in ("group", "key", "max_attempts")})
    return replace(task, **changes)


def task_modules(backend: Any) -> list[str]:
    """The modules of Django tasks ``backend``'s ``OPTIONS`` declare (``task_modules``)."""
    options = getattr(backend, "options", None) or {}
    return list(options.get("task_modules") or ())


def _send(signal: Any, backend: Any, result: Any) -> None:
    """Send a task signal; a receiver that raises is logged and does not change the
    task's outcome (the task already ran, or is about to)."""
    for receiver, response in signal.send_robust(type(backend), task_result=result):
        if isinstance(response, Exception):
            log.error("task signal receiver %r raised", receiver, exc_info=response)


def run_django_task(
    path: str, args: list[Any], kwargs: dict[str, Any], meta: dict[str, Any]
) -> dict[str, Any]:
    """Run one Django task in a durq worker (registered as the durq task ``django``)."""
    job = durq.current_job()
    if job is None:
        raise RuntimeError("run_django_task runs in a durq worker (manage.py durq_worker)")
    close_old_connections()
    try:
        return _run(job, path, args, kwargs, meta)
    finally:
        close_old_connections()


def _run(
    job: durq.Job, path: str, args: list[Any], kwargs: dict[str, Any], meta: dict[str, Any]
) -> dict[str, Any]:
    try:
        backend = task_backends[meta["backend"]]
        task = restore(known_task(path, task_modules(backend)), meta)
    except Exception as exc:  # nothing to retry: the code is not there
        raise durq.Fail(f"cannot load task {str(path)[:200]!r}: {exc}") from exc
    attempts = backend._attempt_log(job.queue)
    history = attempts.read(job.id) if job.attempt > 1 else []
    started = now()
    first_start = history[0].started_at if history else started
    errors = [a.error for a in history]
    if job.attempt - 1 > len(history):  # an attempt ended without reaching the log
        errors.append(backend._lost_attempt(job.queue, job.id))
    worker_ids = [a.worker for a in history] + [worker_id]

    def result(status: str, finished: float | None, errs: list[tuple[str, str]]) -> Any:
        return TaskResult(
            task=task,
            id=job.id,
            status=getattr(TaskResultStatus, status),
            enqueued_at=to_datetime(job.enqueued_at),
            started_at=to_datetime(first_start),
            last_attempted_at=to_datetime(started),
            finished_at=to_datetime(finished),
            args=args,
            kwargs=kwargs,
            backend=backend.alias,
            errors=task_errors(errs),
            worker_ids=list(worker_ids),
        )

    running = result("RUNNING", None, errors)
    _send(task_started, backend, running)
    try:
        if task.takes_context:
            value = task.call(TaskContext(task_result=running), *args, **kwargs)
        else:
            value = task.call(*args, **kwargs)
        value = normalize_json(value)
    except Exception as exc:
        finished = now()
        kind, text = error_of(exc)
        error = (kind, backend.durq_app.redact.text(text))  # stored: no secrets in it
        attempts.append(job.id, Attempt(job.attempt, worker_id, started, finished, error))
        if isinstance(exc, durq.Fail) or job.attempt >= job.max_attempts:
            _send(task_finished, backend, result("FAILED", finished, [*errors, error]))
        raise
    finished = now()
    done = result("SUCCESSFUL", finished, errors)
    object.__setattr__(done, "_return_value", value)
    _send(task_finished, backend, done)
    return Outcome(
        task=path,
        args=args,
        kwargs=kwargs,
        meta=meta,
        return_value=value,
        enqueued_at=job.enqueued_at,
        started_at=first_start,
        last_attempted_at=started,
        finished_at=finished,
        worker_ids=worker_ids,
        errors=errors,
    ).to_json()
