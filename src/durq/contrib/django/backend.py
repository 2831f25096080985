"""DurqBackend: durq as a backend of Django's task API.

    TASKS = {
        "default": {
            "BACKEND": "durq.contrib.django.DurqBackend",
            "QUEUES": ["default", "emails"],
            "OPTIONS": {"url": "redis://localhost:6379/0"},   # else $DURQ_URL
        }
    }

Each Django queue is the durq queue of the same name. A job carries one durq task,
``django``, whose arguments are the Django task's import path, its arguments and its
options; ``python manage.py durq_worker`` runs them (see ``durq.contrib.django.runner``).
A result id is ``<queue>:<random>`` and is also the durq job id, so ``get_result`` reads
one queue, and ``durq`` tools (the dashboard, ``durq dlq``) show the same id Django does.
"""

from __future__ import annotations

import inspect
import math
import secrets
import threading
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone

import durq
from durq.contrib.django import runner
from durq.contrib.django.compat import (
    BaseTaskBackend,
    InvalidTask,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    normalize_json,
    task_enqueued,
)
from durq.contrib.django.known import known_task
from durq.contrib.django.state import AttemptLog, Outcome, task_errors, to_datetime
from durq.contrib.django.task import DurqTask
from durq.errors import DurqError, InvalidArgument
from durq.keys import check_group, check_key, check_queue_name

__all__ = ["DurqBackend", "durq_priority"]

# OPTIONS passed on to durq.App as they are
_APP_OPTIONS = (
    "url",
    "namespace",
    "lease",
    "max_attempts",
    "backoff",
    "result_ttl",
    "enqueue_retry_for",
    "durability",
    "redact",
)
# OPTIONS of the backend itself: the modules that define its tasks, besides each
# installed app's tasks module (durq.contrib.django.known)
_BACKEND_OPTIONS = ("task_modules",)
_DEFAULT_RESULT_TTL = 86400.0  # Django code reads results later than durq code does: a day

_STATUS = {
    durq.JobState.PENDING: "READY",
    durq.JobState.DELAYED: "READY",
    durq.JobState.ACTIVE: "RUNNING",
    durq.JobState.DEAD: "FAILED",
    durq.JobState.SUPERSEDED: "FAILED",
    durq.JobState.CANCELLED: "FAILED",
    durq.JobState.EXPIRED: "FAILED",
}

_apps: dict[str, tuple[Any, durq.App]] = {}
_apps_lock = threading.Lock()


def durq_priority(priority: int) -> int:
    """Django's priority (-100..100) on durq's scale (-10..10): divided by 10, rounded
    half away from zero. Ten Django priorities share one durq priority (1..4 run as 0,
    5..14 as 1), so a difference under 5 may not change the order."""
    return int(math.copysign(math.floor(abs(priority) / 10 + 0.5), priority))


def _app_for(alias: str, params: Mapping[str, Any], options: Mapping[str, Any]) -> durq.App:
    """One durq App per configured backend, shared by the per-thread backend instances
    Django creates (one connection pool per process, not per thread)."""
    with _apps_lock:
        cached = _apps.get(alias)
        if cached is not None and cached[0] is params:
            return cached[1]
        kwargs = {k: options[k] for k in _APP_OPTIONS if k in options}
        kwargs.setdefault("result_ttl", _DEFAULT_RESULT_TTL)
        app = durq.App(**kwargs)
        dispatcher = app.task(name=runner.TASK_NAME, result=True)(runner.run_django_task)
        dispatcher.log_name = runner.log_name  # the worker logs a job by its task's path
        _apps[alias] = (params, app)
        return app


class DurqBackend(BaseTaskBackend):  # from whichever Django is installed
    """Runs Django tasks on durq: reliable (leases, retries, dead letters), fair between
    groups, on Redis.

    ``OPTIONS`` (all optional): ``url`` (default ``$DURQ_URL``), ``namespace``,
    ``lease``, ``max_attempts`` (default 5: an exception or a lost worker costs an
    attempt, and the task is retried after ``backoff`` until they run out),
    ``backoff``, ``result_ttl`` (how long results are kept, default one day),
    ``enqueue_retry_for`` and ``durability``, as for ``durq.App``; and
    ``task_modules``, the modules that define tasks besides each installed app's
    ``tasks`` module (a job runs only a task of these modules, or of one the project
    imported: the import path a job carries is never imported).
    """

    task_class = DurqTask
    supports_defer = True  # run_after becomes a delay on the server's clock
    supports_async_task = True  # run by the worker in a thread of their own
    supports_get_result = True
    supports_priority = True  # mapped onto durq's -10..10 (see durq_priority)

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self._params = params
        self.problems = self._config_problems()
        self._app: durq.App | None = None

    def _config_problems(self) -> list[str]:
        problems = []
        unknown = sorted(set(self.options) - {*_APP_OPTIONS, *_BACKEND_OPTIONS})
        if unknown:
            problems.append(
                f"unknown OPTIONS {unknown}; durq takes {[*_APP_OPTIONS, *_BACKEND_OPTIONS]}"
            )
        modules = self.options.get("task_modules", [])
        if not isinstance(modules, list | tuple) or not all(isinstance(m, str) for m in modules):
            problems.append("OPTIONS['task_modules'] is a list of module names")
        for name in sorted(self.queues):
            try:
                check_queue_name(name)
            except InvalidArgument as exc:
                problems.append(str(exc))
        try:
            durq.App(**{k: self.options[k] for k in _APP_OPTIONS if k in self.options})
        except (DurqError, TypeError, ValueError) as exc:
            problems.append(f"invalid OPTIONS: {exc}")
        return problems

    @property
    def durq_app(self) -> durq.App:
        """The durq App this backend enqueues with (and ``durq_worker`` runs)."""
        if self._app is None:
            if self.problems:
                raise ImproperlyConfigured(f"TASKS[{self.alias!r}]: " + "; ".join(self.problems))
            self._app = _app_for(self.alias, self._params, self.options)
        return self._app

    # -- validation -------------------------------------------------------------------

    def validate_task(self, task: Any) -> None:
        """Django's checks, then durq's: a valid queue name, group, key, attempts and
        expiry."""
        super().validate_task(task)
        try:
            check_queue_name(task.queue_name)
            group, key = getattr(task, "group", None), getattr(task, "key", None)
            if group is not None:
                check_group(group)
            if key is not None:
                check_key(key)
        except InvalidArgument as exc:
            raise InvalidTask(str(exc)) from None
        attempts = getattr(task, "max_attempts", None)
        if attempts is not None and (
            not isinstance(attempts, int) or isinstance(attempts, bool)
            or not 1 <= attempts <= 10000
        ):  # fmt: skip
            raise InvalidTask("max_attempts must be an int in 1..10000")
        expires = getattr(task, "expires", None)
        if expires is not None and (
            not isinstance(expires, (int, float)) or isinstance(expires, bool)
            or not 0 < expires < float("inf")
        ):  # fmt: skip
            raise InvalidTask("expires must be a positive number of seconds")

    def check(self, **kwargs: Any) -> Iterable[Any]:
        """Configuration problems (no network: checks run with every command)."""
        for problem in self.problems:
            yield checks.Error(f"TASKS[{self.alias!r}]: {problem}", id="durq.E001")
        if "durq.contrib.django" not in settings.INSTALLED_APPS:
            yield checks.Warning(
                f"TASKS[{self.alias!r}] uses durq, but 'durq.contrib.django' is not in "
                "INSTALLED_APPS: the durq_worker command will be missing",
                hint="add 'durq.contrib.django' to INSTALLED_APPS",
                id="durq.W001",
            )

    # -- enqueueing -------------------------------------------------------------------

    def _message(self, task: Any, args: Any, kwargs: Any) -> tuple[durq.Message, str]:
        """The job for a call, checked now: arguments that do not fit the function or
        are not JSON are refused here, not by a worker later."""
        self.validate_task(task)
        args, kwargs = normalize_json(list(args)), normalize_json(dict(kwargs))
        params = list(inspect.signature(task.func).parameters.values())
        try:
            signature = inspect.Signature(params[1:] if task.takes_context else params)
            signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{task.module_path}(): {exc}") from None
        meta: dict[str, Any] = {
            "backend": self.alias,
            "queue_name": task.queue_name,
            "priority": task.priority,
            "run_after": task.run_after.isoformat() if task.run_after else None,
        }
        for name in ("group", "key", "max_attempts", "expires"):
            if getattr(task, name, None) is not None:
                meta[name] = getattr(task, name)
        result_id = f"{task.queue_name}:{secrets.token_urlsafe(12)}"
        dispatcher = self.durq_app.tasks[runner.TASK_NAME]
        call = dispatcher.options(
            id=result_id,
            priority=durq_priority(task.priority),
            group=meta.get("group"),
            key=meta.get("key"),
            queue=task.queue_name,
            expires=meta.get("expires"),
        ).call(task.module_path, args, kwargs, meta)
        message = dispatcher.message(call)
        if "max_attempts" in meta:
            message = replace(message, max_attempts=meta["max_attempts"])
        return message, result_id

    def _send(self, task: Any, message: durq.Message, args: Any, kwargs: Any) -> Any:
        if task.run_after is not None:  # as late as possible: the commit may come later
            now = timezone.now() if timezone.is_aware(task.run_after) else datetime.now()
            message = replace(message, delay=max(0.0, (task.run_after - now).total_seconds()))
        enqueued = self.durq_app.queue(task.queue_name).enqueue_many([message])[0]
        result = self._ready(task, enqueued.id, args, kwargs, enqueued_at=timezone.now())
        task_enqueued.send(type(self), task_result=result)
        return result

    def _ready(self, task: Any, result_id: str, args: Any, kwargs: Any, **times: Any) -> Any:
        return TaskResult(
            task=task,
            id=result_id,
            status=TaskResultStatus.READY,
            enqueued_at=times.get("enqueued_at"),
            started_at=None,
            last_attempted_at=None,
            finished_at=None,
            args=list(args),
            kwargs=dict(kwargs),
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        """Enqueue a call now; returns its READY ``TaskResult``. With a ``key`` whose job
        has not started yet, that job's result is returned instead of a new one."""
        message, _ = self._message(task, args, kwargs)
        return self._send(task, message, args, kwargs)

    def enqueue_on_commit(self, task: Any, args: Any, kwargs: Any) -> Any:
        """``task.enqueue_on_commit``: check now, enqueue when the transaction of the
        default database commits (at once outside one), nothing on a rollback.

        The job id is chosen now and the commit hook enqueues with it, so a hook that
        runs twice adds one job (an enqueue of an existing id changes nothing). If Redis
        stays unreachable past ``enqueue_retry_for`` the hook raises after the commit:
        the rows are saved and the job is not (use an outbox table when that must never
        happen).
        """
        message, result_id = self._message(task, args, kwargs)
        transaction.on_commit(lambda: self._send(task, message, args, kwargs))
        return self._ready(task, result_id, args, kwargs)

    # -- results ----------------------------------------------------------------------

    def get_result(self, result_id: str) -> Any:
        """The ``TaskResult`` of ``result_id``; ``TaskResultDoesNotExist`` if there is
        no such job, or it finished longer ago than ``result_ttl``.

        While a task runs, ``worker_ids`` lists the workers of its earlier attempts
        only: the running worker is recorded when its attempt ends.
        """
        queue_name, sep, _ = str(result_id).rpartition(":")
        if not sep or (self.queues and queue_name not in self.queues):
            raise TaskResultDoesNotExist(result_id)
        try:
            queue = self.durq_app.queue(queue_name)
            info = queue.job(result_id)
        except InvalidArgument:
            raise TaskResultDoesNotExist(result_id) from None
        if info is None or info.state is durq.JobState.COMPLETED:
            return self._finished(queue_name, result_id)
        return self._unfinished(queue_name, info)

    def _finished(self, queue_name: str, result_id: str) -> Any:
        app = self.durq_app
        handle = durq.JobHandle(
            app,
            queue_name,
            durq.EnqueueResult(result_id, durq.EnqueueStatus.EXISTS),
            app.tasks[runner.TASK_NAME],
        )
        try:
            outcome = Outcome.from_json(handle.result(timeout=0))
        except (TimeoutError, durq.JobFailed):
            outcome = None
        if outcome is None:
            raise TaskResultDoesNotExist(result_id)
        result = TaskResult(
            task=self._task(outcome.task, outcome.meta, result_id),
            id=result_id,
            status=TaskResultStatus.SUCCESSFUL,
            enqueued_at=to_datetime(outcome.enqueued_at),
            started_at=to_datetime(outcome.started_at),
            last_attempted_at=to_datetime(outcome.last_attempted_at),
            finished_at=to_datetime(outcome.finished_at),
            args=outcome.args,
            kwargs=outcome.kwargs,
            backend=self.alias,
            errors=task_errors(outcome.errors),
            worker_ids=outcome.worker_ids,
        )
        object.__setattr__(result, "_return_value", outcome.return_value)
        return result

    def _unfinished(self, queue_name: str, info: durq.JobInfo) -> Any:
        try:
            path, args, kwargs, meta = runner.call_of(info.payload())
        except (ValueError, DurqError):
            raise TaskResultDoesNotExist(info.id) from None
        status = _STATUS[info.state]
        attempts = self._attempt_log(queue_name).read(info.id)
        errors = [a.error for a in attempts]
        logged = {a.attempt for a in attempts}
        reason = info.reason or {}
        # a failure that did not pass through the task (a lost worker, a timeout, a job
        # that could not start): durq's record holds it
        if reason and reason.get("attempt") not in logged:
            errors.append(_error_of_reason(reason))
        if info.state is durq.JobState.SUPERSEDED:
            errors.append(("durq.errors.DurqError", "superseded by a newer job with its key"))
        started = attempts[0].started_at if attempts else info.dequeued_at
        return TaskResult(
            task=self._task(path, meta, info.id),
            id=info.id,
            status=getattr(TaskResultStatus, status),
            enqueued_at=to_datetime(info.enqueued_at),
            started_at=to_datetime(started),
            last_attempted_at=to_datetime(info.dequeued_at),
            finished_at=to_datetime(info.died_at) if status == "FAILED" else None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=task_errors(errors),
            worker_ids=[a.worker for a in attempts],
        )

    def _lost_attempt(self, queue_name: str, job_id: str) -> tuple[str, str]:
        """The error of an attempt that ended without the task raising (its worker was
        lost, most likely), from durq's record of the job."""
        info = self.durq_app.queue(queue_name).job(job_id)
        reason = (info.reason if info is not None else None) or {"reason": "lost"}
        return _error_of_reason(reason)

    def _attempt_log(self, queue_name: str) -> AttemptLog:
        app = self.durq_app
        return AttemptLog(app.queue(queue_name).client, app.namespace, queue_name, app.result_ttl)

    def _task(self, path: str, meta: Mapping[str, Any], result_id: str) -> Any:
        """The Django task a job calls, with the options it was enqueued with: one of
        the project's, looked up and never imported (``durq.contrib.django.known``)."""
        try:
            task = known_task(path, runner.task_modules(self))
        except LookupError as exc:
            raise TaskResultDoesNotExist(f"{result_id}: {exc}") from None
        return runner.restore(task, meta)


def _error_of_reason(reason: Mapping[str, Any]) -> tuple[str, str]:
    """A durq failure reason as a Django error: the exception's class path and
    traceback when there was an exception, else durq's base error and the reason."""
    if reason.get("type") and reason.get("traceback"):
        return str(reason["type"]), str(reason["traceback"])
    text = f"{reason.get('reason', 'failed')}: {reason.get('message', '')}"
    return "durq.errors.DurqError", text
