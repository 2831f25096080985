"""Running one job: decode it, find its task, call it, and turn what happened into an
Outcome for the acknowledgement buffer. Nothing a task does can crash the worker."""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from durq import tracing
from durq.backoff import exponential
from durq.context import set_current_job
from durq.errors import PayloadError
from durq.flow import RateLimited
from durq.message import encode_error, encode_result, parse_call, task_name_of
from durq.models import Job
from durq.protocol.args import reason_json
from durq.schedules import apply_tick
from durq.task import Fail, Retry, Task
from durq.worker.threads import ThreadRunner

if TYPE_CHECKING:
    from durq.app import App

__all__ = ["Executor", "Outcome"]

log = logging.getLogger("durq.worker")
_DEFAULT_BACKOFF = exponential()


@dataclass(slots=True)
class Outcome:
    """What to tell the queue about a job."""

    kind: Literal["done", "retry", "dead", "defer", "limited", "lost", "cancelled"]
    result: bytes | None = None  # done: the stored result; dead: the stored error
    delay: float = 0.0
    reason: bytes = b""
    summary: str = ""  # one line for the log: what went wrong
    scope: Literal["group", "queue"] = "group"  # limited: what pauses (durq.RateLimited)


def _safe_text(value: Any) -> str:
    """str(value), even for objects whose __str__ or __repr__ raise."""
    for render in (str, repr):
        try:
            return render(value)
        except Exception:
            continue
    return f"<unprintable {type(value).__name__}>"


def _summary(fields: dict[str, Any]) -> str:
    kind = str(fields.get("type") or fields.get("reason") or "failed").rsplit(".", 1)[-1]
    return f"{kind}: {str(fields.get('message', ''))[:200]}"


def _from_frame_of(exc: BaseException, fn: Any) -> TracebackType | None:
    """The traceback of ``exc`` from the frame of ``fn`` on: the worker's own frames
    (the executor, the thread runner, asyncio) that lead to the task say nothing about
    the failure. The whole traceback when ``fn``'s frame is not in it."""
    code = getattr(fn, "__code__", None)
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code is not code:
        tb = tb.tb_next
    return tb or exc.__traceback__


def error_fields(exc: BaseException, fn: Any = None) -> dict[str, Any]:
    """The type, message and traceback of an exception raised by the task function
    ``fn`` (its traceback starts there), however badly the exception behaves."""
    try:
        tb = "".join(traceback.format_exception(type(exc), exc, _from_frame_of(exc, fn)))
    except Exception:
        tb = "<traceback unavailable>"
    return {
        "reason": "exception",
        "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "message": _safe_text(exc),
        "traceback": tb,
    }


class Executor:
    """Runs jobs of one App's tasks: async tasks in the event loop, sync tasks in a
    ThreadRunner."""

    def __init__(self, app: App, threads: int) -> None:
        self.app = app
        self.threads = ThreadRunner(threads)
        self.running: dict[str, asyncio.Task[Outcome]] = {}

    def task_of(self, job: Job) -> Task[Any, Any] | None:
        """The registered task a job calls, if its payload names one."""
        try:
            name = parse_call(job.payload)[0]
        except (PayloadError, ValueError):
            return None
        return self.app.tasks.get(task_name_of(name, job.queue))

    def _dead(self, task: Task[Any, Any] | None, fields: dict[str, Any], job: Job) -> Outcome:
        reason = reason_json(fields, attempt=job.attempt)
        result = encode_error(fields) if task is not None and task.config.result else None
        return Outcome("dead", result=result, reason=reason, summary=_summary(fields))

    def _failed(
        self, task: Task[Any, Any], fields: dict[str, Any], job: Job, delay: float | None = None
    ) -> Outcome:
        if job.attempt >= job.max_attempts:  # the queue will dead-letter it: say why
            return self._dead(task, {**fields, "exhausted": True}, job)
        if delay is None:
            backoff = task.config.backoff or self.app.backoff or _DEFAULT_BACKOFF
            delay = backoff(job.attempt)
        reason = reason_json(fields, attempt=job.attempt)
        return Outcome("retry", delay=delay, reason=reason, summary=_summary(fields))

    def _prepare(self, job: Job) -> tuple[Task[Any, Any], list[Any], dict[str, Any]] | Outcome:
        """The task and arguments of ``job``, or the dead-letter outcome saying why the
        job cannot run at all."""
        try:
            name, args, kwargs, meta = parse_call(job.payload)
        except PayloadError as exc:
            return self._dead(None, {"reason": "undecodable_payload", "message": str(exc)}, job)
        except ValueError as exc:
            return self._dead(None, {"reason": "malformed_payload", "message": str(exc)}, job)
        # a topic event runs the subscriber task of the queue it was published to
        task = self.app.tasks.get(task_name_of(name, job.queue))
        if task is None:
            message = f"no task named {name!r} is registered in this worker's app"
            return self._dead(None, {"reason": "unknown_task", "message": message}, job)
        problem = task.arguments_problem(args, kwargs)
        if problem is not None:
            return self._dead(task, {"reason": "bad_arguments", "message": problem}, job)
        if "tick" in meta:  # a periodic job: its tick time, for durq.current_job()
            apply_tick(job, meta)
        return task, args, kwargs

    async def execute(self, job: Job) -> Outcome:
        """Run ``job`` and return its outcome (in a consumer span when tracing is on)."""
        if tracing.enabled():
            return await tracing.traced_execution(job, self._execute)
        return await self._execute(job)

    async def _execute(self, job: Job) -> Outcome:
        prepared = self._prepare(job)
        if isinstance(prepared, Outcome):
            return prepared
        task, args, kwargs = prepared
        timeout = task.config.timeout
        started = time.monotonic()
        set_current_job(job)  # this coroutine runs in its own asyncio task: local to it
        try:
            if task.is_async:
                value = await asyncio.wait_for(task.fn(*args, **kwargs), timeout)
            else:
                value = await self.threads.run(task.fn, args, kwargs, timeout)
        except RateLimited as exc:  # no attempt counted, however often (see flow.py)
            return Outcome("limited", delay=exc.retry_after, scope=exc.scope, summary=str(exc))
        except Retry as exc:
            fields = {"reason": "retry_requested", "message": exc.reason}
            return self._failed(task, fields, job, exc.delay)
        except Fail as exc:
            return self._dead(task, {"reason": "failed", "message": exc.reason}, job)
        except asyncio.TimeoutError:
            elapsed = time.monotonic() - started
            note = "" if task.is_async else " (its thread was abandoned and replaced)"
            message = f"{task.name} ran {elapsed:.1f} s, over its timeout of {timeout} s{note}"
            return self._failed(task, {"reason": "timeout", "message": message}, job)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return self._failed(task, error_fields(exc, task.fn), job)
        return self._done(task, job, value)

    def _done(self, task: Task[Any, Any], job: Job, value: Any) -> Outcome:
        # a workflow step's result goes to its workflow (the next step's input)
        if not task.config.result and not _in_workflow(job):
            return Outcome("done")
        try:
            return Outcome("done", result=encode_result(value))
        except Exception as exc:  # the job ran; only its return value cannot be stored
            log.warning("job %s: result not stored: %s", job.id, _safe_text(exc))
            error = {"reason": "unstorable_result", "message": _safe_text(exc)}
            return Outcome("done", result=encode_error(error))

    def close(self) -> None:
        """Release the threads."""
        self.threads.close()


def _in_workflow(job: Job) -> bool:
    """True for a step of a workflow (its payload's metadata names the workflow)."""
    try:
        return "wf" in parse_call(job.payload)[3]
    except (PayloadError, ValueError):
        return False
