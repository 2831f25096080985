"""Running one job: decode it, find its task, call it, and turn what happened into an
Outcome for the acknowledgement buffer. Nothing a task does can crash the worker."""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from durq.app import tracing
from durq.app.durable import JobParked
from durq.app.schedule_spec import apply_tick
from durq.app.task import Task
from durq.app.versions import job_version
from durq.backoff import exponential
from durq.context import set_current_job
from durq.errors import Fail, PayloadError, PayloadTooLarge, RateLimited, Retry, StepError
from durq.models import Job
from durq.payloads import TOPIC_MARK, encode_error, encode_result, parse_call, task_name_of
from durq.protocol.args import reason_json
from durq.protocol.holding import capability
from durq.worker.handoff import Handoff
from durq.worker.threads import ThreadRunner

if TYPE_CHECKING:
    from durq.app.app import App

__all__ = ["DONE", "PARKED", "Call", "Executor", "Outcome", "end_hook"]

log = logging.getLogger("durq.worker")
_DEFAULT_BACKOFF = exponential()

# A sync task runs on the event loop's thread, without the hop to a pool thread and
# back (two cross-thread wake-ups, most of an idle pickup's latency), only
# when the loop can lend its thread without ever stalling (worker/handoff.py: the loop
# of `durq worker`; another thread runs the loop once a call has held it TAKEOVER, so no
# lease goes unextended and no other job waits), the job is the only one in
# hand, the task declares no timeout (a pool thread is what enforces one), and its last
# runs were all short: at least INLINE_AFTER in a row, each under INLINE_BUDGET
# seconds. A run over the budget, wherever it ran, ends the streak and makes the streak
# needed next time INLINE_BACKOFF times longer, so a task that is sometimes slow soon
# runs only in threads. (Before issue 30 a slow call stalled the loop itself: leases
# lapsed and the job ran twice.)
INLINE_BUDGET = 0.002
INLINE_AFTER = 3
INLINE_BACKOFF = 4


@dataclass(slots=True)
class Outcome:
    """What to tell the queue about a job."""

    kind: Literal[
        "done", "retry", "dead", "defer", "limited", "lost", "cancelled", "hold", "parked"
    ]
    result: bytes | None = None  # done: the stored result; dead: the stored error
    delay: float = 0.0
    reason: bytes = b""
    summary: str = ""  # one line for the log: what went wrong
    scope: Literal["group", "queue"] = "group"  # limited: what pauses (durq.RateLimited)
    trace: str = ""  # retry, dead: the traceback of the exception, for the log
    error: BaseException | None = None  # retry, dead: the exception, for the hooks
    cap: str = ""  # hold: the capability the job waits for (durq.protocol.holding)


DONE = Outcome("done")
"""The outcome of a job that succeeded and keeps no result (shared: outcomes are never
changed once made)."""

PARKED = Outcome("parked")
"""The outcome of a job that a durable sleep or wait parked (``durq.app.durable``): it
left the worker in the script that parked it, so nothing is sent for it."""

Call = tuple[Task[Any, Any], list[Any], dict[str, Any], dict[str, Any]]
"""A job ready to run: its task, arguments and metadata (``Executor.prepare``)."""


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
    note = (
        " (not retried: the task's retry_on/dont_retry_on)"
        if fields.get("retried") is False
        else ""
    )
    return f"{kind}: {str(fields.get('message', ''))[:200]}{note}"


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


def _trace(fields: dict[str, Any]) -> str:
    """The (redacted) traceback of a failure's fields, if an exception made it."""
    trace = fields.get("traceback")
    return trace if isinstance(trace, str) else ""


def _timed(fn: Callable[..., Any], streak: list[int], args: Any, kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``; its own run time (not the hop to its thread) counts in
    ``streak``, the [short runs in a row, the streak that allows inline runs] of its task.
    Runs in the calling thread, so no coroutine per call is needed to keep the count."""
    began = time.perf_counter()
    try:
        return fn(*args, **kwargs)
    finally:
        if time.perf_counter() - began < INLINE_BUDGET:
            streak[0] += 1
        else:
            streak[0] = 0
            streak[1] = min(streak[1] * INLINE_BACKOFF, 1 << 20)


#: the hook event of each outcome that ends a run (``durq.app.hooks``)
_END_EVENTS = {"done": "task_success", "retry": "task_retry", "dead": "task_failure"}


def end_hook(outcome: Outcome, value: Any) -> tuple[str, Any] | None:
    """The hook event of a run that ended in ``outcome`` and the second argument of its
    hooks (after the job): the returned ``value`` for a success, the exception for a
    retry or a failure; None when no hook runs (a job given back, limited, parked)."""
    event = _END_EVENTS.get(outcome.kind)
    if event is None:
        return None
    return event, value if outcome.kind == "done" else outcome.error


async def _decided(job: Job, prepared: Outcome) -> Outcome:
    """The run of a job whose outcome ``prepare`` decided (it cannot run)."""
    return prepared


def _raised_by(outcome: Outcome, exc: BaseException) -> Outcome:
    """``outcome`` (a fresh retry or dead one) with the exception that made it."""
    outcome.error = exc
    return outcome


class Executor:
    """Runs jobs of one App's tasks: async tasks in the event loop, sync tasks in a
    ThreadRunner."""

    def __init__(self, app: App, threads: int, alone: Callable[[], bool] | None = None) -> None:
        self.app = app
        self.threads = ThreadRunner(threads)
        self.running: dict[str, asyncio.Task[Outcome]] = {}
        # True when the job about to run is the only one in hand (see INLINE_BUDGET)
        self._alone = alone or (lambda: False)
        # sync tasks by name: [short runs in a row, the streak that allows inline runs]
        self._streaks: dict[str, list[int]] = {}
        # the loop's lender of its thread, when the worker runs under run_worker
        self.handoff: Handoff | None = None

    def task_of(self, job: Job) -> Task[Any, Any] | None:
        """The registered task a job calls, if its payload names one."""
        try:
            name = parse_call(job.payload)[0]
        except (PayloadError, ValueError):
            return None
        return self.app.tasks.get(task_name_of(name, job.queue))

    def _dead(self, task: Task[Any, Any] | None, fields: dict[str, Any], job: Job) -> Outcome:
        # every failure passes here or through _failed: what they store and log is
        # redacted first (the app's Redact), so no secret reaches Redis or a log line
        fields = self.app.redact.fields(fields)
        reason = reason_json(fields, attempt=job.attempt)
        result = encode_error(fields) if task is not None and task.config.result else None
        return Outcome(
            "dead", result=result, reason=reason, summary=_summary(fields), trace=_trace(fields)
        )

    def _failed(
        self, task: Task[Any, Any], fields: dict[str, Any], job: Job, delay: float | None = None
    ) -> Outcome:
        if job.attempt >= job.max_attempts:  # the queue will dead-letter it: say why
            return self._dead(task, {**fields, "exhausted": True}, job)
        if delay is None:
            backoff = task.config.backoff or self.app.backoff or _DEFAULT_BACKOFF
            delay = backoff(job.attempt)
        fields = self.app.redact.fields(fields)
        reason = reason_json(fields, attempt=job.attempt)
        return Outcome(
            "retry", delay=delay, reason=reason, summary=_summary(fields), trace=_trace(fields)
        )

    def _raised(self, task: Task[Any, Any], exc: Exception, job: Job) -> Outcome:
        fields = error_fields(exc, task.fn)
        if not task.config.retries(exc):  # retry_on / dont_retry_on: not worth a retry
            return self._dead(task, {**fields, "retried": False}, job)
        return self._failed(task, fields, job)

    def prepare(self, job: Job) -> Call | Outcome:
        """The task, arguments and metadata of ``job``, or the dead-letter outcome saying
        why the job cannot run at all. The worker prepares each job once, when it is
        delivered (the task decides its lease and its thread), and runs it from that."""
        try:
            name, args, kwargs, meta = parse_call(job.payload)
        except PayloadTooLarge as exc:  # written past the limit: never decoded nor run
            return self._dead(None, {"reason": "payload_too_large", "message": str(exc)}, job)
        except PayloadError as exc:
            return self._dead(None, {"reason": "undecodable_payload", "message": str(exc)}, job)
        except ValueError as exc:
            return self._dead(None, {"reason": "malformed_payload", "message": str(exc)}, job)
        # a topic event runs the subscriber task of the queue it was published to
        task_name = task_name_of(name, job.queue)
        task = self.app.tasks.get(task_name)
        try:
            version = job_version(meta)
        except ValueError as exc:
            return self._dead(None, {"reason": "malformed_payload", "message": str(exc)}, job)
        if task is None or version not in task.versions:
            # a worker of another deploy runs it: it waits for one (durq.protocol.holding)
            summary = f"held: this worker does not run {task_name} at version {version}"
            return Outcome("hold", cap=capability(task_name, version), summary=summary)
        if version != task.version:
            try:
                args, kwargs = task.upgrade(version, args, kwargs)
            except Exception as exc:
                fields = {**error_fields(exc), "reason": "migration_failed", "version": version}
                return self._dead(task, fields, job)
        problem = task.arguments_problem(args, kwargs)
        if problem is not None:
            return self._dead(task, {"reason": "bad_arguments", "message": problem}, job)
        if "tick" in meta:  # a periodic job: its tick time, for durq.current_job()
            apply_tick(job, meta)
        return task, args, kwargs, meta

    def prepare_batch(self, jobs: Sequence[Job], task: Task[Any, Any]) -> list[Call | Outcome]:
        """``prepare`` of each of ``jobs``, the items of a batch of ``task`` (of one
        queue: they share its codec). The common item, a payload ``[name, args,
        kwargs]`` naming ``task`` at its current version (no metadata), takes only its
        decoding (the batch's in one pass) and its argument check: what ``prepare``
        would find for it (the task, the version) is found once for the batch. Any
        other item goes through ``prepare`` itself."""
        name = task.name
        if (
            not jobs
            or name.startswith(TOPIC_MARK)
            or self.app.tasks.get(name) is not task
            or task.version != job_version({})
        ):
            return [self.prepare(job) for job in jobs]
        check = task.arguments_problem
        codecs, datas = [job.codec_id for job in jobs], [job.data for job in jobs]
        payloads = jobs[0].codec.decode_each(codecs, datas)
        out: list[Call | Outcome] = []
        append = out.append
        for job, p in zip(jobs, payloads, strict=True):
            if (
                type(p) is list
                and len(p) == 3
                and p[0] == name
                and type(p[1]) is list
                and type(p[2]) is dict
                and check(p[1], p[2]) is None
            ):
                append((task, p[1], p[2], {}))
            else:
                append(self.prepare(job))  # it says why (an error decodes again)
        return out

    def execute(
        self, job: Job, prepared: Call | Outcome | None = None, traced: bool | None = None
    ) -> Coroutine[Any, Any, Outcome]:
        """The coroutine that runs ``job`` (``prepared``: what ``prepare(job)`` returned)
        and returns its outcome (in a consumer span when tracing is on; ``traced``: the
        caller's answer to ``tracing.enabled()``, asked once for a batch of jobs).

        A plain function returning the coroutine, not a coroutine itself: the caller
        awaits the run directly, so a job that suspends on I/O is resumed through one
        durq frame less each time (bench/archive/analysis-wave2.md §3.2 item 2)."""
        if prepared is None:
            prepared = self.prepare(job)
        if isinstance(prepared, Outcome):  # decided without a run: it cannot run
            run: Callable[..., Coroutine[Any, Any, Outcome]] = _decided
        else:
            run = self._hooked if self.app.hooks.around_jobs else self._execute
        if tracing.enabled() if traced is None else traced:
            return tracing.traced_execution(job, partial(run, prepared=prepared))
        return run(job, prepared)

    async def _hooked(self, job: Job, prepared: Call) -> Outcome:
        """``_execute`` with the app's hooks of a job's events (``durq.app.hooks``), in
        the job's context, once its outcome is decided."""
        hooks = self.app.hooks
        job.task = prepared[0].name
        set_current_job(job)
        await hooks.run("task_start", job)
        returned: list[Any] = []
        outcome = await self._execute(job, prepared, returned)
        end = end_hook(outcome, returned[0] if returned else None)
        if end is not None:
            await hooks.run(end[0], job, end[1])
        return outcome

    async def _execute(
        self, job: Job, prepared: Call, returned: list[Any] | None = None
    ) -> Outcome:
        """Run a job; its outcome (``returned``: gets the task's return value)."""
        task, args, kwargs, meta = prepared
        timeout = task.config.timeout
        started = time.monotonic()
        job.task = task.name  # for the records of the task's own loggers (JobLogContext)
        set_current_job(job)  # this coroutine runs in its own asyncio task: local to it
        try:
            if task.is_async:
                if timeout is None:  # one coroutine less to resume at each await
                    value = await task.fn(*args, **kwargs)
                else:
                    value = await asyncio.wait_for(task.fn(*args, **kwargs), timeout)
            else:
                value = await self._run_sync(task, args, kwargs, timeout)
        except JobParked:  # a durable sleep or wait: the job left the worker
            return PARKED
        except asyncio.TimeoutError as exc:
            elapsed = time.monotonic() - started
            note = "" if task.is_async else " (its thread was abandoned and replaced)"
            return _raised_by(self.timed_out(task, job, elapsed, note), exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return self.raised(task, job, exc)
        if returned is not None:  # for the hooks (_hooked)
            returned.append(value)
        # a workflow step's result goes to its workflow (the next step's input)
        if not task.config.result and "wf" not in meta:
            return DONE  # most jobs: no call to _done
        return self._done(task, job, value, keep=True)

    # -- outcomes of a call made elsewhere too (the process pool's children, worker.pool)

    def raised(self, task: Task[Any, Any], job: Job, exc: BaseException) -> Outcome:
        """The outcome of a run of ``task`` that raised ``exc`` (with ``exc``, for the
        hooks, when it is a failure)."""
        outcome = self._outcome_of(task, job, exc)
        return outcome if outcome.kind == "limited" else _raised_by(outcome, exc)

    def _outcome_of(self, task: Task[Any, Any], job: Job, exc: BaseException) -> Outcome:
        if isinstance(exc, RateLimited):  # no attempt counted, however often
            return Outcome("limited", delay=exc.retry_after, scope=exc.scope, summary=str(exc))
        if isinstance(exc, Retry):
            fields = {"reason": "retry_requested", "message": exc.reason}
            return self._failed(task, fields, job, exc.delay)
        if isinstance(exc, Fail):  # StepError: a durable step misused, another run would too
            why = "step_error" if isinstance(exc, StepError) else "failed"
            return self._dead(task, {"reason": why, "message": exc.reason}, job)
        if isinstance(exc, Exception):  # retried unless retry_on / dont_retry_on say no
            return self._raised(task, exc, job)
        return self._failed(task, error_fields(exc, task.fn), job)

    def returned(self, task: Task[Any, Any], job: Job, meta: dict[str, Any], value: Any) -> Outcome:
        """The outcome of a run of ``task`` that returned ``value`` (kept when the task
        stores results, or the job is a workflow's step)."""
        return self._done(task, job, value, keep=task.config.result or "wf" in meta)

    def timed_out(self, task: Task[Any, Any], job: Job, elapsed: float, note: str) -> Outcome:
        """The outcome of a run of ``task`` stopped at its timeout (``note``: how)."""
        timeout = task.config.timeout
        message = f"{task.name} ran {elapsed:.1f} s, over its timeout of {timeout} s{note}"
        return self._failed(task, {"reason": "timeout", "message": message}, job)

    def failed(self, task: Task[Any, Any], job: Job, fields: dict[str, Any]) -> Outcome:
        """The outcome of a run of ``task`` that failed as ``fields`` say (a reason
        and a message): retried by its policy, or dead-lettered once its attempts are
        spent."""
        return self._failed(task, fields, job)

    async def _run_sync(
        self, task: Task[Any, Any], args: list[Any], kwargs: dict[str, Any], timeout: float | None
    ) -> Any:
        """Run a sync task's call: on the loop's thread when it may borrow it, else in a
        pool thread."""
        lender = self._inline(task, timeout)  # first: it makes the task's streak
        call = (task.fn, self._streaks[task.name], args, kwargs)
        if lender is not None:
            return await lender.call(_timed, call)
        return await self.threads.run(_timed, call, {}, timeout)

    def failure(
        self, task: Task[Any, Any], job: Job, exc: BaseException, elapsed: float
    ) -> Outcome:
        """The outcome of ``job`` when its run of ``task`` raised ``exc`` after
        ``elapsed`` seconds: for a batch task, of each item the batch's failure (or
        ``Item.fail``) ends."""
        if isinstance(exc, asyncio.TimeoutError):
            note = "" if task.is_async else " (its thread was abandoned and replaced)"
            return self.timed_out(task, job, elapsed, note)
        return self.raised(task, job, exc)

    def _inline(self, task: Task[Any, Any], timeout: float | None) -> Handoff | None:
        """The lender of the event loop's thread when a sync task's call may run there
        (see INLINE_BUDGET), else None; either way its run time decides whether later
        calls may."""
        streak = self._streaks.get(task.name)
        if streak is None:
            streak = self._streaks[task.name] = [0, INLINE_AFTER]
        lender = self.handoff
        if (
            lender is not None
            and streak[0] >= streak[1]
            and timeout is None
            and self._alone()
            and lender.ready()
        ):
            return lender
        return None

    def completed(self, task: Task[Any, Any], job: Job, value: Any) -> Outcome:
        """The outcome of ``job`` completed with ``value``, stored as its result (an
        item of a batch task that keeps results)."""
        return self._done(task, job, value, keep=True)

    def _done(self, task: Task[Any, Any], job: Job, value: Any, *, keep: bool) -> Outcome:
        if not keep:
            return DONE
        try:
            return Outcome("done", result=encode_result(value))
        except Exception as exc:  # the job ran; only its return value cannot be stored
            why = self.app.redact.text(_safe_text(exc))
            log.warning(
                "job %s (%s) of %s: result not stored: %s", job.id, task.name, job.queue, why
            )
            error = {"reason": "unstorable_result", "message": why}
            return Outcome("done", result=encode_error(error))

    def close(self) -> None:
        """Release the threads."""
        self.threads.close()
