"""Durable steps inside a task: ``durq.step``, ``durq.sleep``, ``durq.sleep_until``,
``durq.wait_for`` and ``durq.step_key`` (docs/durable.md).

The model is replay. A job's function runs from the top each time the job runs (its
first run, a retry after a crash or a failure, a resume after a sleep or a wait); each
step that completed in an earlier run returns its stored result without running, a
sleep whose end has passed and a wait whose outcome is recorded return at once. A step
is known by its name, never by its position or a hash of the code, so a deploy that
adds, removes or reorders steps resumes the jobs in flight.

Each call is a plan, a generator of actions (``_Io``: a protocol operation; ``_Call``:
the step's own function; ``_Pause``: the wait before a step's retry) that one of two
drivers runs: ``_run_async`` in an async task (the call returns a coroutine to await),
``_run_sync`` in a sync task's thread (the call blocks; its Redis calls run on the
worker's loop). So the logic exists once for both kinds of task.

A sleep or a wait that parks its job unwinds the task with ``JobParked``, a
BaseException (``except Exception`` in the task does not stop it): the job has left the
worker, and the worker sends nothing for it.
"""

from __future__ import annotations

import asyncio
import datetime
import inspect
import math
import time
from collections.abc import Callable, Generator
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import orjson

from durq.backoff import Backoff, exponential, fixed
from durq.context import current_job
from durq.errors import Fail, InvalidArgument, LeaseLost, RateLimited, Retry, StepError, WaitTimeout
from durq.models import Job
from durq.protocol import durable
from durq.protocol.args import MAX_DELAY, delay_ms, seconds
from durq.protocol.calls import Op

if TYPE_CHECKING:
    from durq._async.queue import AsyncQueue

__all__ = [
    "DurableHost",
    "DurableRun",
    "JobParked",
    "install",
    "uninstall",
    "sleep",
    "sleep_until",
    "step",
    "step_key",
    "wait_for",
]

T = TypeVar("T")

#: the most runs a step's own retries may add (``retries=``)
MAX_STEP_RETRIES = 100
#: the pause before a step's retry, by default: 0.5 s doubling to 30 s, with jitter
_STEP_BACKOFF = exponential(base=0.5, cap=30.0)


class JobParked(BaseException):  # not an error: the job left the worker
    """The job left its worker: a sleep or a wait parked it (or a cancel asked while it
    ran ended it there). Unwinds the task; the worker sends nothing for the job."""


class DurableHost(Protocol):
    """What a worker provides to the jobs it runs (``durq.worker.durable``)."""

    def run_of(self, job: Job) -> DurableRun:
        """The durable run of ``job``'s current delivery (made on first use)."""
        ...


_HOST: ContextVar[DurableHost | None] = ContextVar("durq_durable_host", default=None)
_STEP: ContextVar[str | None] = ContextVar("durq_step", default=None)


def install(host: DurableHost | None) -> Token[DurableHost | None]:
    """Make ``host`` serve the durable calls of the jobs run from this context (the
    worker, before it starts its jobs: each job's task copies the context)."""
    return _HOST.set(host)


def uninstall(token: Token[DurableHost | None]) -> None:
    """Undo ``install`` (the worker, as it stops)."""
    _HOST.reset(token)


@dataclass(frozen=True, slots=True)
class _Io:
    op: Op[Any]


@dataclass(frozen=True, slots=True)
class _Call:
    name: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Pause:
    seconds: float


Plan = Generator[_Io | _Call | _Pause, Any, T]


class DurableRun:
    """The durable calls of one delivery of a job: what its earlier runs stored (read
    once, at the first call of a run that may have any) and the names this run used."""

    def __init__(
        self, queue: AsyncQueue, job: Job, loop: asyncio.AbstractEventLoop, is_async: bool
    ) -> None:
        self.queue = queue
        self.job = job
        self.loop = loop
        self.is_async = is_async
        self.stored: dict[str, bytes] | None = None  # by name, once read
        self.now_ms = 0  # the server's time when they were read
        self.names: set[str] = set()  # used in this run
        self.sleeps = 0  # unnamed sleeps so far: sleep#1, sleep#2, ...
        self.parked: str | None = None  # 'sleep', 'wait' or 'cancelled' once the job left
        self.lost = False  # a write was refused: another worker holds the job

    # -- the drivers ----------------------------------------------------------------

    def run(self, plan: Plan[T]) -> Any:
        """Run ``plan``: a coroutine in an async task, the value in a sync one."""
        return self._run_async(plan) if self.is_async else self._run_sync(plan)

    async def _run_async(self, plan: Plan[T]) -> T:
        value: Any = None
        error: Exception | None = None
        while True:
            try:
                action = plan.send(value) if error is None else plan.throw(error)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            value, error = None, None
            if isinstance(action, _Io):
                value = await self.queue._run(action.op)
                continue
            if isinstance(action, _Pause):
                await asyncio.sleep(action.seconds)
                continue
            token = _STEP.set(action.name)
            try:
                value = action.fn(*action.args, **action.kwargs)
                if inspect.isawaitable(value):
                    value = await value
            except Exception as exc:
                error = exc
            finally:
                _STEP.reset(token)

    def _run_sync(self, plan: Plan[T]) -> T:
        value: Any = None
        error: Exception | None = None
        while True:
            try:
                action = plan.send(value) if error is None else plan.throw(error)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            value, error = None, None
            if isinstance(action, _Io):
                # the worker's connections belong to its loop: the call runs there
                future = asyncio.run_coroutine_threadsafe(self.queue._run(action.op), self.loop)
                value = future.result()
                continue
            if isinstance(action, _Pause):
                time.sleep(action.seconds)
                continue
            token = _STEP.set(action.name)
            try:
                value = action.fn(*action.args, **action.kwargs)
                if inspect.isawaitable(value):
                    close = getattr(value, "close", None)
                    if close is not None:
                        close()  # never awaited: say so once, not with a warning later
                    raise StepError(
                        f"step {action.name!r} of a sync task returned an awaitable: a sync "
                        "task's steps must be plain functions"
                    )
            except StepError:
                raise
            except Exception as exc:
                error = exc
            finally:
                _STEP.reset(token)

    # -- what every plan does first -----------------------------------------------------

    def _claim(self, name: str) -> None:
        inside = _STEP.get()
        if inside is not None:
            raise StepError(
                f"a durable call inside step {inside!r}: steps, sleeps and waits belong in "
                "the task's own code, not in a step's function"
            )
        if name in self.names:
            raise StepError(
                f"step name {name!r} is used twice in one run of job {self.job.id}: a name "
                "is a step's identity; in a loop, give each its own (f'page-{i}')"
            )
        self.names.add(name)

    def _load(self) -> Plan[None]:
        """What earlier runs stored, read once per run. A first delivery has none: only
        the holder of a lease stores steps, and a signal writes only to jobs that wait."""
        if self.stored is None:
            if self.job.deliveries <= 1:
                self.stored = {}
            else:
                now, found = yield _Io(durable.read_steps(self.queue.keys, self.job.id))
                if self.stored is None:  # another call of this run read them meanwhile
                    self.stored, self.now_ms = found, now

    def _stored(self, name: str, kinds: tuple[str, ...]) -> dict[str, Any] | None:
        assert self.stored is not None
        raw = self.stored.get(name)
        return None if raw is None else self._record(name, raw, kinds)

    def _record(self, name: str, raw: bytes, kinds: tuple[str, ...]) -> dict[str, Any]:
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            data = {}
        if not isinstance(data, dict) or data.get("k") not in kinds:
            kind = data.get("k", "unreadable") if isinstance(data, dict) else "unreadable"
            raise StepError(
                f"{name!r} holds a {kind} record where this run has a {kinds[0]}: a name "
                "keeps its kind across deploys; give the new one another name"
            )
        return data

    def _refused(self, reply: durable.Reply) -> None:
        self.lost = True
        status = reply.status.name if reply.status is not None else reply.tag
        raise LeaseLost(self.job.id, f" (durable call refused: {status})")

    def _left(self, why: str) -> None:
        self.parked = why
        raise JobParked(why)

    # -- the plans ----------------------------------------------------------------------

    def step_plan(
        self, name: str, call: _Call, retries: int, backoff: Backoff, limit: int
    ) -> Plan[Any]:
        self._claim(name)
        yield from self._load()
        found = self._stored(name, ("step",))
        if found is not None:
            return found.get("v")
        began = time.monotonic()
        tries = 0
        while True:
            tries += 1
            try:
                value = yield call
                break
            except (Retry, Fail, RateLimited):
                raise  # the task's own word on the job, not a flaky call
            except Exception:
                if tries > retries:
                    raise
            yield _Pause(max(backoff(tries), 0.0))
        ms = round((time.monotonic() - began) * 1000)
        try:
            body = durable.step_body(value, ms, tries, limit)
        except InvalidArgument as exc:  # ran, but cannot be stored: running again is no cure
            raise StepError(f"step {name!r}: {exc}") from exc
        job = self.job
        reply = yield _Io(durable.record_step(self.queue.keys, job.id, job.token, name, body))
        if reply.tag == "refused":
            self._refused(reply)
        if reply.tag == "kept":  # recorded before (by this delivery's twin): the first wins
            return self._record(name, reply.value, ("step",)).get("v")
        return orjson.loads(body)["v"]  # as a replay returns it: through JSON

    def sleep_plan(self, name: str | None, after: int | None, until: int | None) -> Plan[None]:
        if name is None:
            self.sleeps += 1
            name = f"sleep#{self.sleeps}"
        self._claim(name)
        yield from self._load()
        found = self._stored(name, ("sleep",))
        if found is not None and int(found.get("u") or 0) <= self.now_ms:
            return None  # slept already
        job = self.job
        op = durable.sleep(self.queue.keys, job.id, job.token, name, after=after, until=until)
        reply = yield _Io(op)
        self._settle(name, reply, ("sleep",), "sleep")
        return None

    def wait_plan(self, signal: str, name: str | None, timeout: int | None) -> Plan[Any]:
        name = name or f"wait:{signal}"
        self._claim(name)
        yield from self._load()
        kinds = ("wait", "signal", "timeout")
        found = self._stored(name, kinds)
        if found is not None and found["k"] != "wait":
            return self._outcome(name, found)
        job = self.job
        reply = yield _Io(durable.wait(self.queue.keys, job.id, job.token, name, signal, timeout))
        if reply.tag == "record":
            return self._outcome(name, self._record(name, reply.value, kinds))
        self._settle(name, reply, kinds, "wait")
        return None

    def _settle(self, name: str, reply: durable.Reply, kinds: tuple[str, ...], why: str) -> None:
        """Act on a sleep's or a wait's reply: go on (done), or leave the worker."""
        if reply.tag == "refused":
            self._refused(reply)
        elif reply.tag == "conflict":
            self._record(name, reply.value, kinds)  # raises StepError, naming the kind
        elif reply.tag == "parked":
            self._left(why)
        elif reply.tag == "cancelled":
            self._left("cancelled")

    def _outcome(self, name: str, record: dict[str, Any]) -> Any:
        if record["k"] == "signal":
            return record.get("v")
        deadline = record.get("u")
        raise WaitTimeout(str(record.get("s")), name, int(deadline) / 1000 if deadline else None)


# -- the API ---------------------------------------------------------------------------


def _run_of(what: str) -> DurableRun:
    job = current_job()
    host = _HOST.get()
    if job is None:
        raise RuntimeError(f"{what} works only inside a task run by a durq worker")
    if host is None:
        raise StepError(
            f"{what}: this job runs where durable steps cannot reach Redis (a process "
            "pool's child, or a job run by hand): run the task in the worker's own loop "
            "or threads (docs/durable.md)"
        )
    return host.run_of(job)


def _backoff(value: Backoff | float | None) -> Backoff:
    if value is None:
        return _STEP_BACKOFF
    if callable(value):
        return value
    return fixed(seconds("backoff", value))


def step(
    name: str,
    fn: Callable[..., Any],
    /,
    *args: Any,
    retries: int = 0,
    backoff: Backoff | float | None = None,
    **kwargs: Any,
) -> Any:
    """Run ``fn(*args, **kwargs)`` once for this job, as step ``name``: its result (JSON
    data) is stored with the job before the call returns, and every later run of the job
    (a retry, a resume) gets the stored result without running ``fn`` again. In an async
    task, await it (``fn`` may be a coroutine function); in a sync task, call it.

    A step that raises is not stored: with ``retries`` it runs again that many times at
    most, ``backoff`` seconds apart (a number, or a ``durq.Backoff``: 0.5 s doubling to
    30 s by default), while the job keeps its lease and its attempt; then the exception
    goes on as any task failure (the job retries by its own policy; completed steps stay
    stored). ``name`` must be unique within a run (``StepError`` otherwise); give each
    step of a loop its own, ``f"page-{i}"``. Names beginning with ``~`` are durq's.
    For keyword arguments named ``retries`` or ``backoff``, pass a
    ``functools.partial``."""
    run = _run_of("durq.step")
    name = _step_name(name)
    if not callable(fn):
        raise InvalidArgument(f"durq.step({name!r}, ...) needs a function, got {fn!r}")
    if isinstance(retries, bool) or not isinstance(retries, int):
        raise InvalidArgument(f"retries must be an int, got {retries!r}")
    if not 0 <= retries <= MAX_STEP_RETRIES:
        raise InvalidArgument(f"retries must be in 0..{MAX_STEP_RETRIES}, got {retries}")
    call = _Call(name, fn, args, kwargs)
    limit = run.queue.codec.max_payload_bytes
    return run.run(run.step_plan(name, call, retries, _backoff(backoff), limit))


def _step_name(name: Any) -> str:
    try:
        return durable.check_step_name(name)
    except InvalidArgument as exc:
        raise StepError(str(exc)) from None


def sleep(seconds: float, *, name: str | None = None) -> Any:
    """Sleep ``seconds`` without holding a worker: the job parks in the queue (no worker
    slot, no group slot, no place under ``max_active``, no attempt counted) and runs
    again from the top once the time has passed, when this call returns at once. The end
    is fixed the first time the job reaches the sleep (server time): a replay never
    moves it. Await it in an async task. ``name``: the sleep's identity (default
    ``sleep#1``, ``sleep#2``... in the order a run reaches them; name a sleep that a
    deploy may move)."""
    run = _run_of("durq.sleep")
    after = delay_ms(seconds, "seconds")
    return run.run(run.sleep_plan(None if name is None else _step_name(name), after, None))


def sleep_until(when: float | datetime.datetime, *, name: str | None = None) -> Any:
    """``sleep`` until ``when``: epoch seconds, or a datetime (a naive one is local
    time); a time past returns at once."""
    run = _run_of("durq.sleep_until")
    at = when.timestamp() if isinstance(when, datetime.datetime) else seconds("when", when)
    if not 0 <= at <= time.time() + MAX_DELAY:
        raise InvalidArgument(f"sleep_until({when!r}): a time before 1970 or past ten years")
    until = math.floor(at * 1000)
    return run.run(run.sleep_plan(None if name is None else _step_name(name), None, until))


def wait_for(signal: str, /, timeout: float | None = None, *, name: str | None = None) -> Any:
    """Wait for signal ``signal`` (``App.signal``) and return its payload. A signal kept
    from before (sent within its ttl, a day by default) is returned at once; else the job
    parks, holding no worker, until the signal comes (one signal wakes every job waiting
    for it) or ``timeout`` seconds have passed since the wait was first reached, when
    ``durq.WaitTimeout`` is raised here. The outcome is recorded: every later run gets
    the same. Await it in an async task. ``name``: the wait's identity (default
    ``wait:<signal>``)."""
    run = _run_of("durq.wait_for")
    signal = durable.check_signal_name(signal)
    ms = None if timeout is None else delay_ms(timeout, "timeout")
    return run.run(run.wait_plan(signal, None if name is None else _step_name(name), ms))


def step_key() -> str:
    """Inside a step's function: a key that names this step of this job, the same in
    every run (``<queue>:<job id>:<step name>``), to make the step's side effect
    idempotent where the service allows it (an idempotency key for a payment API): no
    fence covers a worker that lost its lease and has not yet noticed."""
    name, job = _STEP.get(), current_job()
    if name is None or job is None:
        raise RuntimeError("durq.step_key() works only inside a step's function")
    return f"{job.queue}:{job.id}:{name}"
