"""A child of the process pool: it runs the jobs the worker sends it, one at a time, in
its main thread, and sends back each one's outcome. It holds no lease and acknowledges
nothing: the worker does both, fenced by the job's lease token, so a child killed at any
moment leaves nothing half-done in Redis.

What a task sees is what it sees in a thread: ``durq.current_job()`` (id, attempt, token,
``cancelled``, ``progress``), ``durq.Retry``, ``durq.Fail``, ``durq.RateLimited``,
results. A cancel and a lost lease reach the child as messages it reads when the task
asks (``Job.cancelled``, ``Job.progress``): a task that never asks pays nothing.

At the task's timeout the worker sends SIGUSR1: the handler raises
``durq.TimeLimitExceeded`` in the task (only while a task runs: a signal that arrives as
the job ends is ignored). A task it was raised in fails with reason ``timeout``, however
it ends.

The app's hooks (``durq.app.hooks``) run here, in the child that runs the job, as
Celery's signals run in its prefork children: ``worker_start`` once, after the fork and
before the child's first job (where a database pool or Sentry is set up per process),
and ``task_start``, then ``task_success``, ``task_retry`` or ``task_failure``, around
each job, with the job as ``durq.current_job()``. A hook that raises is logged and
changes nothing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from types import FrameType
from typing import TYPE_CHECKING, Any

from durq.context import set_current_job
from durq.errors import LeaseLost, TimeLimitExceeded
from durq.models import Job
from durq.protocol.args import reason_json
from durq.protocol.control import progress_json
from durq.worker.executor import Executor, Outcome, end_hook
from durq.worker.pool.rss import SelfRss
from durq.worker.pool.wire import Channel, make_job

if TYPE_CHECKING:
    from durq.app.app import App
    from durq.app.hooks import Hooks
    from durq.app.task import Task

__all__ = ["ChildControl", "serve"]

log = logging.getLogger("durq.worker")

#: the signal that tells a child its task ran past its timeout
TIME_LIMIT_SIGNAL = signal.SIGUSR1

_running = [False]  # a task runs in this process (one per child: its main thread)
#: the TimeLimitExceeded raised in the running task, if one was
_limited: list[TimeLimitExceeded | None] = [None]


def _time_limit(signum: int, frame: FrameType | None) -> None:
    if _running[0]:
        _running[0] = False  # raised once: a task that catches it is not hit again
        exc = _limited[0] = TimeLimitExceeded(
            "the task ran past its timeout; its process is killed soon"
        )
        raise exc


class ChildHooks:
    """The app's hooks as a child runs them: in its main thread, an ``async def`` hook
    awaited in the child's own event loop (made at its first use and kept, so that what a
    hook opens on it stays usable by the next)."""

    def __init__(self, hooks: Hooks) -> None:
        self.hooks = hooks
        self.around_jobs = hooks.around_jobs
        self._loop: asyncio.AbstractEventLoop | None = None

    def run(self, event: str, *args: Any) -> None:
        """Call the hooks of ``event`` (``Hooks.run``: one that raises is logged)."""
        if not self.hooks.by_event[event]:
            return
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(self.hooks.run(event, *args))


class ChildControl:
    """``Job.cancelled`` and ``Job.progress`` of the job a child runs (``JobControl``)."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.seq = -1  # the job running
        self.cancelled = False
        self.lost = False

    def begin(self, seq: int) -> None:
        self.seq, self.cancelled, self.lost = seq, False, False

    def note(self, message: tuple[Any, ...]) -> None:
        """A flag from the worker (messages about a job that ended are ignored)."""
        if len(message) >= 2 and message[1] == self.seq:
            if message[0] == "cancel":
                self.cancelled = True
            elif message[0] == "lost":
                self.lost = True

    def _look(self) -> None:
        for message in self.channel.poll():
            self.note(message)

    def is_cancelled(self, job: Job) -> bool:
        self._look()
        return self.cancelled

    def progress(self, job: Job, fraction: float, info: Any = None) -> None:
        progress_json(fraction, info)  # bad input fails in the task, at the call
        self._look()
        if self.lost:
            raise LeaseLost(job.id, ": this worker no longer holds the job")
        self.channel.send(("progress", self.seq, fraction, info))


def _run(executor: Executor, job: Job, hooks: ChildHooks) -> Outcome:
    prepared = executor.prepare(job)
    if isinstance(prepared, Outcome):  # it cannot run: dead-lettered without hooks
        return prepared
    task, args, kwargs, meta = prepared
    job.task = task.name  # for the records of the task's own loggers (JobLogContext)
    set_current_job(job)
    began = time.monotonic()  # the worker's timer counts the hooks too
    try:
        if hooks.around_jobs:
            hooks.run("task_start", job)
        outcome, value = _call(executor, task, job, (args, kwargs, meta), began)
        end = end_hook(outcome, value) if hooks.around_jobs else None
        if end is not None:
            hooks.run(end[0], job, end[1])
        return outcome
    finally:
        set_current_job(None)


def _call(
    executor: Executor,
    task: Task[Any, Any],
    job: Job,
    call: tuple[list[Any], dict[str, Any], dict[str, Any]],
    began: float,
) -> tuple[Outcome, Any]:
    """Run the task (``call``: its arguments and metadata); its outcome and the value it
    returned."""
    args, kwargs, meta = call
    _limited[0] = None
    try:
        try:
            _running[0] = True
            value = task.fn(*args, **kwargs)
        finally:
            _running[0] = False
    except BaseException as exc:
        if _limited[0] is None:
            return executor.raised(task, job, exc), None
    else:
        if _limited[0] is None:
            return executor.returned(task, job, meta, value), value
    # TimeLimitExceeded was raised in it: timed out, however it ended (it may have caught
    # the exception and returned, or raised another)
    elapsed = time.monotonic() - began
    outcome = executor.timed_out(task, job, elapsed, " (stopped by durq.TimeLimitExceeded)")
    outcome.error = _limited[0]
    return outcome, None


def serve(channel: Channel, app: App) -> None:
    """Run jobs until the worker closes its end of the socket."""
    executor = Executor(app, threads=0)
    control = ChildControl(channel)
    memory = SelfRss()
    hooks = ChildHooks(app.hooks)
    signal.signal(TIME_LIMIT_SIGNAL, _time_limit)
    hooks.run("worker_start")  # set-up per process: before the child takes a job
    channel.send(("ready", os.getpid()))
    while True:
        try:
            message = channel.recv()
        except TimeLimitExceeded:  # raised as a job ended: the worker knows
            continue
        if message is None:
            return
        if message[0] != "run":
            continue  # a flag about a job that ended
        seq = message[1]
        control.begin(seq)
        try:
            job = make_job(message[2], app.codec)
            job.control = control
            outcome = _run(executor, job, hooks)
        except TimeLimitExceeded:  # between the task's end and its outcome
            outcome = Outcome("retry", reason=reason_json({"reason": "timeout"}))
        except Exception as exc:  # a bug in durq itself: keep the job safe and say so
            log.exception("job in a child process: internal error")
            outcome = Outcome("defer", delay=1.0, reason=str(exc).encode())
        fields = (outcome.kind, outcome.result, outcome.delay, outcome.reason,
                  outcome.summary, outcome.scope)  # fmt: skip
        channel.send(("done", seq, fields, memory.read()))
