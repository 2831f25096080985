"""One name for each piece of Django's task API, from whichever is installed.

Django 6 ships the API as ``django.tasks``; Django 5.2 (and 4.2+) projects get the same
API from the ``django-tasks`` backport, as ``django_tasks``. Both are imported by name
here so that the backend is written once. ``django.tasks`` wins when both are there: it
is what a Django 6 project's ``TASKS`` setting configures.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "DEFAULT_TASK_QUEUE_NAME",
    "SOURCE",
    "TASK_MAX_PRIORITY",
    "TASK_MIN_PRIORITY",
    "BaseTaskBackend",
    "InvalidTask",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "normalize_json",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]


def _load() -> tuple[str, Any, Any, Any, Any, Any]:
    try:
        package = importlib.import_module("django.tasks")
    except ImportError:
        try:
            package = importlib.import_module("django_tasks")
        except ImportError:
            raise ImportError(
                "durq.contrib.django needs Django 6 (django.tasks), or Django 5.2 with "
                "the django-tasks backport: pip install 'durq[django]'"
            ) from None
    name = package.__name__
    return (
        name,
        package,
        importlib.import_module(f"{name}.base"),
        importlib.import_module(f"{name}.backends.base"),
        importlib.import_module(f"{name}.exceptions"),
        importlib.import_module(f"{name}.signals"),
    )


SOURCE, _package, _base, _backends, _exceptions, _signals = _load()
"""``django.tasks`` or ``django_tasks``: where the task API was found."""

Task: Any = _base.Task
TaskContext: Any = _base.TaskContext
TaskError: Any = _base.TaskError
TaskResult: Any = _base.TaskResult
TaskResultStatus: Any = _base.TaskResultStatus
TASK_MIN_PRIORITY: int = _base.TASK_MIN_PRIORITY
TASK_MAX_PRIORITY: int = _base.TASK_MAX_PRIORITY
DEFAULT_TASK_QUEUE_NAME: str = _base.DEFAULT_TASK_QUEUE_NAME
BaseTaskBackend: Any = _backends.BaseTaskBackend
# the backport calls it InvalidTaskError; Django 6 renamed it InvalidTask
InvalidTask: Any = getattr(_exceptions, "InvalidTask", None) or _exceptions.InvalidTaskError
TaskResultDoesNotExist: Any = _exceptions.TaskResultDoesNotExist
task: Any = _package.task
task_backends: Any = _package.task_backends
task_enqueued: Any = _signals.task_enqueued
task_started: Any = _signals.task_started
task_finished: Any = _signals.task_finished


def _normalize_json() -> Any:
    try:  # Django 6
        return importlib.import_module("django.utils.json").normalize_json
    except (ImportError, AttributeError):
        return importlib.import_module("django_tasks.utils").normalize_json


normalize_json: Any = _normalize_json()
"""Django's own conversion of arguments and return values to JSON data (tuples become
lists; anything else that is not JSON raises TypeError)."""
