"""Every exception of durq's API: those durq raises, and those a task raises to tell the
worker what to do with its job (tests/test_errors.py keeps this tree and the classes
equal).

    DurqError
    ├── InvalidArgument (also a ValueError): an argument or option out of range
    │   └── PayloadError: a payload cannot be stored or read back
    │       ├── PayloadTooLarge: over the queue's max_payload_bytes
    │       ├── NotSerializable (also a TypeError): a value the serializer cannot encode
    │       └── PayloadRefused: a codec the queue does not accept (pickle not chosen)
    ├── LeaseLost: the caller no longer holds the job's lease (fencing)
    ├── JobNotFound: no job with this id
    ├── CorruptQueue: a durq key holds another Redis type, or a record is unreadable
    ├── ForeignLibrary: code that is not durq's holds the names of durq's Functions
    ├── NotDurable: fewer copies of a write confirmed than the durability mode asks
    ├── FleetTooOld: a workflow that live workers of an older durq could not run
    ├── RedisUnavailable (also redis-py's ConnectionError): Redis did not answer for as
    │   long as durq retries (``enqueue_retry_for``)
    ├── WaitTimeout: durq.wait_for's deadline passed with no signal (inside a task)
    ├── JobFailed: the job whose result was awaited was dead-lettered
    │   ├── Cancelled: it was cancelled
    │   ├── Expired: it was not started by its expiry time
    │   └── WorkflowFailed: the workflow whose result was awaited failed
    ├── TimeLimitExceeded: raised inside a sync task of the process pool past its timeout
    ├── ChildDied: a process pool's child died running the job (the hooks of its end)
    ├── ScriptLoadError (also a RuntimeError): a Lua script or one of its includes is
    │   missing, or the includes form a cycle (a broken install)
    ├── ServerNotFound (also a RuntimeError): no Redis/Valkey binary for ``durq server``
    │   or the test servers (durq.dev)
    └── ServerStartError (also a RuntimeError): such a server exited or did not answer

    Exception (raised by a task, caught by the worker)
    ├── Retry: run the job again after a delay (the attempt counts)
    ├── Fail: dead-letter the job at once
    │   └── StepError (also a DurqError): a durable step misused: no retry
    └── RateLimited: give the job back and pause its group or queue (no attempt counts)

Other connection problems surface as redis-py's ``redis.exceptions.ConnectionError``
and ``TimeoutError``; durq never puts credentials in its own messages.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from redis.exceptions import ConnectionError as RedisConnectionError

__all__ = [
    "Cancelled",
    "ChildDied",
    "CorruptQueue",
    "DurqError",
    "Expired",
    "Fail",
    "FleetTooOld",
    "ForeignLibrary",
    "InvalidArgument",
    "JobFailed",
    "JobNotFound",
    "LeaseLost",
    "NotDurable",
    "NotSerializable",
    "PayloadError",
    "PayloadRefused",
    "PayloadTooLarge",
    "RateLimited",
    "RedisUnavailable",
    "Retry",
    "ScriptLoadError",
    "ServerNotFound",
    "ServerStartError",
    "StepError",
    "TimeLimitExceeded",
    "WaitTimeout",
    "WorkflowFailed",
]

#: the longest pause a RateLimited may ask for (seconds)
MAX_RETRY_AFTER = 366 * 86400.0


class DurqError(Exception):
    """Base class of every error durq raises itself."""


class InvalidArgument(DurqError, ValueError):
    """An argument or option is out of range or of the wrong kind."""


class PayloadError(InvalidArgument):
    """A payload cannot be stored, or a stored payload cannot be read back."""


class PayloadTooLarge(PayloadError):
    """The encoded payload is larger than the queue's ``max_payload_bytes``."""


class NotSerializable(PayloadError, TypeError):
    """The serializer cannot encode a value; the message names where it is."""


class PayloadRefused(PayloadError):
    """The payload was stored with a codec this queue does not accept (e.g. pickle)."""


class LeaseLost(DurqError):
    """The lease on a job is no longer held by the caller.

    The lease expired and the job was handed to another consumer, or the job was
    already released, requeued or deferred. Nothing was changed: a job is completed
    by one holder only.
    """

    def __init__(self, job_id: str, detail: str = "") -> None:
        self.job_id = job_id
        super().__init__(
            f"lease lost on job {job_id!r}: it expired and the job was handed out again, "
            f"or it is no longer active{detail}"
        )


class JobNotFound(DurqError):
    """No job with this id exists in the queue."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        super().__init__(f"no job {job_id!r} in this queue")


class CorruptQueue(DurqError):
    """A durq key holds another Redis type, or a job record cannot be read.

    Something other than durq wrote into the queue's keys. Jobs are never left half-moved
    by it; ``Queue.check()`` (or ``durq doctor``) lists the offending keys.
    """


class ForeignLibrary(DurqError):
    """The server holds code that is not durq's under the names of durq's Functions.

    durq's Redis Functions library and its functions have fixed, public names
    (``durq_<hash>``), and a function runs with the permissions of whoever calls it. So
    before its first FCALL on a server, durq reads the library back (``FUNCTION LIST
    ... WITHCODE``) and refuses to call it unless the code is exactly its own: a user
    allowed ``FUNCTION LOAD`` could otherwise have durq's callers (an operator, the
    dashboard, a worker) run code of theirs with their permissions. Nothing was run.
    docs/deployment.md ("AUTH and ACL") says how to deny ``FUNCTION LOAD`` to all but an
    admin.
    """

    def __init__(self, library: str, detail: str) -> None:
        self.library = library
        super().__init__(
            f"the Redis Functions library {library} on this server is not durq's own "
            f"({detail}); durq refuses to call it. Find out who loaded it (ACL LOG; the "
            "users allowed FUNCTION LOAD), delete it (FUNCTION DELETE), then load durq's "
            "with `durq functions load`; until then, DURQ_EVALSHA=1 runs durq's scripts "
            "by their hash instead"
        )


class NotDurable(DurqError):
    """Fewer copies of a write confirmed than the durability mode asks for.

    The write was applied on the primary; with an idempotent id it is safe to retry.
    ``results`` holds what the enqueue returned (ids and statuses), when known.
    """

    results: object = None


class FleetTooOld(DurqError):
    """A workflow was not submitted: live workers of an older durq (``workers``, their
    ids) consume its queues, and it uses what their release's workflows cannot hold
    (``problems``). Nothing was written: submit it again once those workers are
    upgraded or stopped (``durq workers`` lists them), or without what they lack."""

    def __init__(
        self, workers: list[str], queue: str, problems: list[str], versions: str = "0.1.0"
    ) -> None:
        self.workers = list(workers)
        self.problems = list(problems)
        shown = ", ".join(self.workers[:5]) + (" ..." if len(self.workers) > 5 else "")
        super().__init__(
            f"workflow for queue {queue} not submitted: workers of durq {versions} ({shown}) "
            f"consume its queues, and {versions}'s workflows cannot hold this: "
            f"{'; '.join(self.problems)}. Submit it again once they are upgraded or "
            "stopped (durq workers lists them), or without it; nothing was written"
        )


class RedisUnavailable(DurqError, RedisConnectionError):
    """Redis did not answer for as long as durq retries a call that is safe to repeat
    (an enqueue: ``enqueue_retry_for``, 10 s by default, plus at most one connect
    timeout). The message names the address redis-py could not reach and what to check;
    it is also a ``redis.exceptions.ConnectionError``, so handlers of that still work."""

    @classmethod
    def after(cls, exc: Exception, retry_for: float) -> RedisUnavailable:
        """The error of a call that Redis did not answer for ``retry_for`` seconds."""
        return cls(
            f"Redis did not answer for {retry_for:g} s ({exc}): check that the server "
            "runs and that the app's URL (host, port, password, TLS) points at it; "
            "enqueue_retry_for sets how long durq keeps trying"
        )


class WaitTimeout(DurqError):
    """Raised inside a task by ``durq.wait_for`` when its deadline passed with no signal.
    The timeout is recorded with the job: a later run of the task (a retry, a resume)
    gets this same exception at the same wait, and a signal that comes later changes
    nothing (docs/durable.md)."""

    def __init__(self, signal: str, name: str, deadline: float | None) -> None:
        self.signal = signal
        self.name = name
        self.deadline = deadline
        super().__init__(f"wait {name!r}: no signal {signal!r} came by its deadline")


class JobFailed(DurqError):
    """The job whose result was awaited ended in the dead letters."""

    def __init__(self, job_id: str, error: Mapping[str, Any]) -> None:
        self.job_id = job_id
        self.error = dict(error)
        kind = error.get("type") or error.get("reason", "failed")
        super().__init__(f"job {job_id} failed: {kind}: {error.get('message', '')}")


class Cancelled(JobFailed):
    """The job whose result was awaited was cancelled (``JobHandle.cancel``,
    ``Queue.cancel``): it did not run, or was stopped, and will not run again."""


class Expired(JobFailed):
    """The job whose result was awaited was not started by its expiry time (the
    ``expires`` option): it never ran."""


class WorkflowFailed(JobFailed):
    """The workflow whose result was awaited ended failed (policy "fail": a step was
    dead-lettered; policy "wait": a dead step waited for was purged or evicted by
    ``dead_cap``, reason ``purged`` / ``evicted``; ``error["error"]`` is that step's
    reason)."""

    def __init__(self, workflow_id: str, error: dict[str, Any]) -> None:
        super().__init__(workflow_id, error)
        step = error.get("job", "?")
        inner = error.get("error") or {}
        kind = inner.get("type") or inner.get("reason", "failed")
        self.args = (f"workflow {workflow_id} failed: step {step}: {kind}: "
                     f"{inner.get('message', '')}",)  # fmt: skip


# -- raised by a task


class Retry(Exception):
    """Raise from a task to retry it after ``delay`` seconds (default: the task's
    backoff). The attempt counts; when attempts are exhausted the job is dead-lettered."""

    def __init__(self, reason: str = "retry requested", *, delay: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay = delay


class Fail(Exception):
    """Raise from a task to dead-letter its job at once, with ``reason``."""

    def __init__(self, reason: str = "failed by the task") -> None:
        super().__init__(reason)
        self.reason = reason


class StepError(Fail, DurqError):
    """A durable step was misused: a name used twice in one run, a name that holds
    another kind of record (a sleep where a step was), a step's result that JSON cannot
    hold, a step inside a step, more steps than a job may store. Running the job again
    would do the same, so the worker dead-letters it at once, with this reason (its
    stored steps kept: replayed once the code is fixed, it resumes where it stopped)."""


class RateLimited(Exception):
    """Raise from a task when an upstream says "slow down" (an HTTP 429, a quota error).

    The job goes back to the head of its group without counting an attempt (however
    often it happens, it never dead-letters the job), and its scope pauses for
    ``retry_after`` seconds for every worker: ``"group"`` (the default) pauses the job's
    group (ungrouped jobs form one group), ``"queue"`` the whole queue. Failures still
    count attempts as usual.
    """

    def __init__(self, retry_after: float, *, scope: Literal["group", "queue"] = "group") -> None:
        if (
            isinstance(retry_after, bool)
            or not isinstance(retry_after, (int, float))
            or not math.isfinite(retry_after)
            or not 0 <= retry_after <= MAX_RETRY_AFTER
        ):
            raise InvalidArgument(
                f"retry_after must be a number of seconds in 0..{MAX_RETRY_AFTER:.0f}, "
                f"got {retry_after!r}"
            )
        if scope not in ("group", "queue"):
            raise InvalidArgument(f"scope must be 'group' or 'queue', got {scope!r}")
        super().__init__(f"rate limited: retry after {retry_after:g} s ({scope})")
        self.retry_after = float(retry_after)
        self.scope = scope


# -- raised inside a task by the worker


class TimeLimitExceeded(DurqError):
    """Raised inside a sync task that runs in the process pool (``durq worker --pool
    process``, ``@app.task(pool="process")``) when it passes its ``timeout``: the worker
    signals the child process, whose Python code gets this exception at its next
    bytecode (a call blocked in C code gets it when the call returns).

    Catch it to clean up, briefly: ``kill_grace`` seconds after the timeout (3 by
    default) the child is killed with SIGKILL and replaced, whatever it does. Either way
    the job fails with the reason ``timeout`` and is retried or dead-lettered by its
    policy, as in Celery's ``soft_time_limit``/``time_limit`` pair.
    """


class ChildDied(DurqError):
    """The exception the ``task_retry`` and ``task_failure`` hooks get for a job whose
    child process of the process pool died running it, by itself (a signal such as
    SIGSEGV or the OOM killer's SIGKILL, an exit code): the child could run no hook, so
    the worker runs them, and the message says how the child died (Celery's
    ``WorkerLostError``). A child killed at the hard time limit gives
    ``TimeLimitExceeded`` instead.
    """


class ScriptLoadError(DurqError, RuntimeError):
    """A script or one of its includes is missing, or the includes form a cycle."""


class ServerNotFound(DurqError, RuntimeError):
    """No usable Redis/Valkey server binary could be found (durq.dev)."""


class ServerStartError(DurqError, RuntimeError):
    """The server process exited or did not answer PING in time (durq.dev)."""
