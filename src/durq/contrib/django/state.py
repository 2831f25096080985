"""What the backend knows about one Django task, and where it keeps it.

A Django task result is read from three places, none written twice:

- durq's own job record (``Queue.job``): status, enqueue time, attempts, the time of
  the last attempt, the last failure (class path and traceback) and when it died;
- the job's stored result (``JobHandle.result``), written by the worker in the same
  atomic step that completes the job: the return value with the run's times, worker
  ids and earlier errors (the record itself is gone by then);
- an attempt log, ``<namespace>:django:<queue>:attempts:<id>``, a Redis list with one
  entry per *failed* attempt (worker id, times, error). A job that succeeds at once
  never touches it, so the happy path costs no extra round trip.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import orjson
from django.conf import settings

from durq.contrib.django.compat import TaskError

__all__ = ["Attempt", "AttemptLog", "Outcome", "error_of", "timestamp", "to_datetime"]

log = logging.getLogger("durq.contrib.django")


def to_datetime(ts: float | None) -> datetime | None:
    """Seconds since the epoch as Django expects them: aware UTC with ``USE_TZ``,
    naive local time without."""
    if ts is None:
        return None
    if settings.USE_TZ:
        return datetime.fromtimestamp(ts, tz=timezone.utc)
    return datetime.fromtimestamp(ts)


def timestamp(when: datetime) -> float:
    """The inverse of ``to_datetime`` (naive datetimes are local time, as in Django)."""
    return when.timestamp()


def error_of(exc: BaseException) -> tuple[str, str]:
    """The exception's class path and formatted traceback, as ``TaskError`` holds them."""
    cls = type(exc)
    try:
        text = "".join(traceback.format_exception(cls, exc, exc.__traceback__))
    except Exception:  # an exception whose __str__ raises still gets recorded
        text = f"{cls.__qualname__}: <unprintable>"
    return f"{cls.__module__}.{cls.__qualname__}", text


def task_errors(pairs: Sequence[Sequence[str]]) -> list[Any]:
    """``TaskError`` objects from ``(class path, traceback)`` pairs."""
    return [TaskError(exception_class_path=p, traceback=tb) for p, tb in pairs]


@dataclass
class Attempt:
    """One failed attempt, as the attempt log keeps it."""

    attempt: int
    worker: str
    started_at: float
    finished_at: float
    error: tuple[str, str]

    def dumps(self) -> bytes:
        return orjson.dumps(
            {
                "attempt": self.attempt,
                "worker": self.worker,
                "started_at": self.started_at,
                "finished_at": self.finished_at,
                "error": list(self.error),
            }
        )

    @classmethod
    def loads(cls, raw: bytes) -> Attempt | None:
        try:
            data = orjson.loads(raw)
            path, text = data["error"]
            return cls(
                int(data["attempt"]),
                str(data["worker"]),
                float(data["started_at"]),
                float(data["finished_at"]),
                (str(path), str(text)),
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None  # an entry written by something else: skip it, keep the rest


class AttemptLog:
    """The failed attempts of the jobs of one queue (single-key commands only)."""

    def __init__(self, client: Any, namespace: str, queue: str, ttl: float) -> None:
        self.client = client
        self.prefix = f"{namespace}:django:{queue}:attempts:"
        self.ttl_ms = max(int(ttl * 1000), 1000)

    def read(self, job_id: str) -> list[Attempt]:
        """The failed attempts of ``job_id``, oldest first."""
        raws = self.client.lrange(self.prefix + job_id, 0, -1)
        return [a for a in map(Attempt.loads, raws) if a is not None]

    def append(self, job_id: str, attempt: Attempt) -> None:
        """Record a failed attempt. A write that fails is logged, not raised: the job's
        own record keeps its last error either way."""
        key = self.prefix + job_id
        try:
            pipe = self.client.pipeline(transaction=True)
            pipe.rpush(key, attempt.dumps())
            pipe.pexpire(key, self.ttl_ms)
            pipe.execute()
        except Exception as exc:
            log.warning("job %s: attempt %d not logged: %s", job_id, attempt.attempt, exc)


@dataclass
class Outcome:
    """A successful run, as the worker stores it for ``get_result``: everything needed
    to rebuild the ``TaskResult`` after durq has dropped the job's record."""

    task: str
    args: list[Any]
    kwargs: dict[str, Any]
    meta: dict[str, Any]
    return_value: Any
    enqueued_at: float
    started_at: float
    last_attempted_at: float
    finished_at: float
    worker_ids: list[str]
    errors: list[tuple[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "django_task": 1,
            "task": self.task,
            "args": self.args,
            "kwargs": self.kwargs,
            "meta": self.meta,
            "return_value": self.return_value,
            "enqueued_at": self.enqueued_at,
            "started_at": self.started_at,
            "last_attempted_at": self.last_attempted_at,
            "finished_at": self.finished_at,
            "worker_ids": self.worker_ids,
            "errors": [list(e) for e in self.errors],
        }

    @classmethod
    def from_json(cls, data: Any) -> Outcome | None:
        if not isinstance(data, Mapping) or data.get("django_task") != 1:
            return None
        try:
            return cls(
                task=str(data["task"]),
                args=list(data["args"]),
                kwargs=dict(data["kwargs"]),
                meta=dict(data["meta"]),
                return_value=data["return_value"],
                enqueued_at=float(data["enqueued_at"]),
                started_at=float(data["started_at"]),
                last_attempted_at=float(data["last_attempted_at"]),
                finished_at=float(data["finished_at"]),
                worker_ids=[str(w) for w in data["worker_ids"]],
                errors=[(str(p), str(t)) for p, t in data["errors"]],
            )
        except (KeyError, TypeError, ValueError):
            return None


def now() -> float:
    """The worker's clock, for the times of a run (the queue's times are the server's)."""
    return time.time()
