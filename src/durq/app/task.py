"""Tasks: functions registered on an App, enqueued by name with JSON arguments.

A task's job carries ``[name, args, kwargs]`` (see ``durq.payloads``). Arguments are
checked when the job is enqueued: they must bind to the function's signature and be
plain JSON data, and an error names the offending argument.
"""

from __future__ import annotations

import datetime
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, Literal, ParamSpec, Protocol, TypeVar

from durq.app import tracing
from durq.app.arguments import ArgumentCheck
from durq.app.batch import Batch
from durq.app.handle import HandleOwner, JobHandle
from durq.app.typecheck import TypeCheck
from durq.app.versions import Migration, runnable_versions, upgrade
from durq.backoff import Backoff
from durq.codec import PayloadCodec, check_json
from durq.errors import InvalidArgument, NotSerializable
from durq.models import Message
from durq.payloads import build_call

__all__ = [
    "NO_OPTIONS",
    "Call",
    "Task",
    "TaskCall",
    "TaskCaller",
    "TaskConfig",
    "TaskOwner",
]

P = ParamSpec("P")
R = TypeVar("R")


class TaskOwner(HandleOwner, Protocol):
    """What tasks and job handles use of the App that declared them. Typed by this
    protocol rather than by ``App``, which imports this module: no import circle."""

    #: the App's tasks by name
    tasks: dict[str, Task[Any, Any]]
    #: attempts before a job is dead-lettered, for tasks that set none
    max_attempts: int
    #: the largest encoded job accepted
    max_payload_bytes: int

    def enqueue_calls(self, calls: Iterable[Call[Any]]) -> list[JobHandle[Any]]:
        """Enqueue prepared calls; their handles in order."""
        ...

    def _enqueue(self, calls: Sequence[TaskCall]) -> list[JobHandle[Any]]:
        """The one path of every task call to its queue; handles in order."""
        ...

    async def _aenqueue(self, calls: Sequence[TaskCall]) -> list[JobHandle[Any]]:
        """``_enqueue`` for asyncio code."""
        ...


@dataclass(frozen=True)
class TaskConfig:
    """How a task runs, as declared with ``@app.task(...)`` (``Task.config``). None
    means: the app's default. Per-job options are ``Task.options()``."""

    queue: str
    max_attempts: int | None = None
    backoff: Backoff | None = None
    timeout: float | None = None
    lease: float | None = None
    result: bool = False
    result_ttl: float | None = None
    pool: Literal["thread", "process"] | None = None
    #: the exceptions a failed run is retried for (``@app.task(retry_on=...)``)...
    retry_on: tuple[type[Exception], ...] = (Exception,)
    #: ...unless it is one of these (they dead-letter the job at once)
    dont_retry_on: tuple[type[Exception], ...] = ()
    #: argument values checked against the function's type hints at enqueue
    #: (``@app.task(check_types=False)`` opts out; see ``durq.app.typecheck``)
    check_types: bool = True
    #: the version of the task's arguments, and the migrations of older versions' (see
    #: ``durq.app.versions``)
    version: int = 1
    migrate: Mapping[int, Migration] | None = None

    def retries(self, exc: Exception) -> bool:
        """Whether a run that raised ``exc`` may be retried."""
        return isinstance(exc, self.retry_on) and not isinstance(exc, self.dont_retry_on)

    #: a batch task's batches (its function receives lists of items), or None
    batch: Batch | None = None


def exception_types(name: str, value: Any) -> tuple[type[Exception], ...]:
    """``value`` (an exception class or a tuple of them) as a tuple, or InvalidArgument
    naming the option: checked when the task is declared, not when a job fails."""
    found = value if isinstance(value, tuple) else (value,)
    for item in found:
        if not (isinstance(item, type) and issubclass(item, Exception)):
            raise InvalidArgument(
                f"{name} takes exception classes (a class or a tuple of them), not {item!r}"
            )
    return found


@dataclass(frozen=True)
class _EnqueueOptions:
    id: str | None = None
    delay: float | None = None
    priority: int | None = None
    group: str | None = None
    key: str | None = None
    replace: bool | None = None
    queue: str | None = None
    expires: float | datetime.datetime | None = None
    ttl: float | None = None
    debounce: float | None = None
    max_wait: float | None = None
    keep_last: bool | None = None
    eta: datetime.datetime | None = None

    def __post_init__(self) -> None:
        if self.eta is not None:
            _check_eta(self.eta, self.delay)

    @property
    def due(self) -> float | datetime.datetime | None:
        """A job's delay as the queue takes it: ``delay``, or the ``eta`` itself, which
        the enqueue script compares with the server's clock (never this process's)."""
        return self.delay if self.eta is None else self.eta

    @property
    def wait(self) -> float | None:
        """Seconds before a workflow step is ready: ``delay``, or the time left until
        ``eta`` (measured now, by this process's clock; an ``eta`` past: at once). A
        job's ``eta`` goes to the queue as it is (``due``)."""
        if self.eta is None:
            return self.delay
        now = datetime.datetime.now(datetime.timezone.utc)
        return max(0.0, (self.eta - now).total_seconds())


def _check_eta(eta: Any, delay: float | None) -> None:
    """InvalidArgument unless ``eta`` is an aware datetime given without ``delay``."""
    if not isinstance(eta, datetime.datetime):
        raise InvalidArgument(f"eta must be a datetime, not {type(eta).__name__}")
    if eta.tzinfo is None or eta.utcoffset() is None:
        raise InvalidArgument(
            f"eta={eta.isoformat()} has no time zone: give an aware datetime "
            "(e.g. datetime.now(timezone.utc) + timedelta(hours=1))"
        )
    if delay is not None:
        raise InvalidArgument("give eta or delay, not both")


#: the options of a call that has none of its own (shared: never changed)
NO_OPTIONS = _EnqueueOptions()
#: the keyword arguments of a call that has none (shared: encoding only reads them)
_NO_KWARGS: dict[str, Any] = {}

#: a task call on its way to its queue: the task, its positional and keyword arguments,
#: its per-job options (a plain tuple: ``Task.enqueue`` makes one per call)
TaskCall = tuple["Task[Any, Any]", tuple[Any, ...], dict[str, Any], _EnqueueOptions]


@dataclass(frozen=True)
class Call(Generic[R]):
    """A prepared call of a task, for ``enqueue_many``: ``task.call(*args, **kwargs)``;
    and a workflow step: ``task.s(...)`` (``immutable``: ``task.si(...)``, a step that
    does not receive the previous step's result; see ``durq.app.workflows``)."""

    task: Task[Any, R]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    options: _EnqueueOptions = NO_OPTIONS
    immutable: bool = False

    def with_options(self, **options: Any) -> Call[R]:
        """The same call with per-job options (those of ``Task.options``)."""
        return replace(self, options=replace(self.options, **options))


class TaskCaller(Generic[P, R]):
    """Enqueues calls of a task with fixed per-job options: ``task.options(delay=5)``."""

    def __init__(self, task: Task[P, R], options: _EnqueueOptions) -> None:
        self.task = task
        self._options = options

    def call(self, *args: P.args, **kwargs: P.kwargs) -> Call[R]:
        """A prepared call with these options, for ``enqueue_many``; as a workflow
        step, ``s``."""
        return Call(self.task, args, dict(kwargs), self._options)

    if TYPE_CHECKING:  # typed apart: a step may get its first argument from the one before

        def s(self, *args: Any, **kwargs: Any) -> Call[R]:
            """A workflow step with these options (see ``Task.s``): ``call``."""
            ...

    else:
        s = call

    def si(self, *args: Any, **kwargs: Any) -> Call[R]:
        """An immutable workflow step with these options (see ``Task.si``)."""
        return Call(self.task, args, dict(kwargs), self._options, immutable=True)

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> JobHandle[R]:
        """Enqueue one call; returns its handle."""
        return self.task.app._enqueue(((self.task, args, kwargs, self._options),))[0]

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> JobHandle[R]:
        """``enqueue`` for asyncio code."""
        return (await self.task.app._aenqueue(((self.task, args, kwargs, self._options),)))[0]

    def enqueue_many(
        self, calls: Iterable[Call[R] | tuple[Any, ...] | dict[str, Any]]
    ) -> list[JobHandle[R]]:
        """Enqueue many calls with these options, as ``Task.enqueue_many`` does (items
        made with ``call(...)`` keep their own options)."""
        return self.task.app._enqueue(self.task._task_calls(calls, self._options))

    async def aenqueue_many(
        self, calls: Iterable[Call[R] | tuple[Any, ...] | dict[str, Any]]
    ) -> list[JobHandle[R]]:
        """``enqueue_many`` for asyncio code."""
        return await self.task.app._aenqueue(self.task._task_calls(calls, self._options))


class Task(Generic[P, R]):
    """A function registered on an App. Calling it runs it here; ``enqueue`` runs it in
    a worker."""

    def __init__(self, app: TaskOwner, fn: Callable[P, R], name: str, config: TaskConfig) -> None:
        self.app = app
        self.fn = fn
        self.name = name
        self.config = config
        self.is_async = inspect.iscoroutinefunction(fn)
        # what a call's arguments must fit: a batch task's calls are its items
        batch = config.batch
        self.signature = batch.item_signature() if batch is not None else inspect.signature(fn)
        # the signature check, remembered per argument shape
        self._check = ArgumentCheck(name, self.signature)
        # the type check, when there are hints to check and the task did not opt out
        annotated = any(p.annotation is not p.empty for p in self.signature.parameters.values())
        self._types = (
            TypeCheck(name, fn, self.signature) if config.check_types and annotated else None
        )
        #: the versions of jobs this task runs, newest first (durq.app.versions)
        self.versions = runnable_versions(config.version, config.migrate or {})
        #: what every job of this task carries in its payload's metadata: its version
        #: (nothing at version 1, so an unversioned task writes the payloads it always did)
        self.version_meta: dict[str, Any] | None = (
            {"v": config.version} if config.version > 1 else None
        )
        #: the name the worker's log lines give a job of this task, from its arguments,
        #: for a task that runs other code by name (a Django job: its task's path); None:
        #: the task's own name
        self.log_name: Callable[[list[Any]], str] | None = None
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __repr__(self) -> str:
        return f"<Task {self.name} queue={self.config.queue}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    @property
    def queue(self) -> str:
        """The queue this task's jobs go to by default."""
        return self.config.queue

    def handle(self, job_id: str, queue: str | None = None) -> JobHandle[R]:
        """The handle of this task's job ``job_id`` (an id stored from an earlier
        ``enqueue``), in ``queue`` (default: the task's queue; for a sharded queue, the
        shard the handle named: ``handle.queue``), to wait for its result, read its
        state or cancel it."""
        return JobHandle.of(self.app, queue or self.queue, job_id, self)

    @property
    def version(self) -> int:
        """The version of the task's arguments (``@app.task(version=...)``)."""
        return self.config.version

    def upgrade(self, version: int, args: list[Any], kwargs: dict[str, Any]) -> tuple[Any, Any]:
        """The arguments of a job of an older ``version`` (one of ``versions``) upgraded
        to this task's version through its migrations."""
        return upgrade(self.name, self.config.migrate or {}, version, self.version, args, kwargs)

    def options(
        self,
        *,
        id: str | None = None,
        delay: float | None = None,
        priority: int | None = None,
        group: str | None = None,
        key: str | None = None,
        replace: bool | None = None,
        queue: str | None = None,
        expires: float | datetime.datetime | None = None,
        ttl: float | None = None,
        debounce: float | None = None,
        max_wait: float | None = None,
        keep_last: bool | None = None,
        eta: datetime.datetime | None = None,
    ) -> TaskCaller[P, R]:
        """Per-job options: ``task.options(delay=60, group="tenant-7").enqueue(...)``.

        Args:
            id: idempotency id: enqueueing it again is a no-op while it exists.
            delay: seconds before the job is ready.
            priority: -10..10, higher first within its group.
            group: the group (tenant) served in turn with the others.
            key: dedup key; with ``replace=True`` a newer job supersedes the pending one.
            queue: another queue than the task's.
            expires: seconds from now, or a datetime: a job not started by then never
                runs (it ends ``expired``; retries included).
            ttl: throttle (with ``key``): one job per key per ``ttl`` seconds, counted
                from the enqueue that created it.
            debounce: (with ``key``) the job starts ``debounce`` seconds after the last
                enqueue of a burst, with the newest arguments; ``max_wait`` bounds the
                wait from the burst's first enqueue, so a steady stream still runs.
            keep_last: (with ``key``) while a job of the key runs, one follow-up waits,
                with the newest arguments.
            eta: an aware datetime the job is ready at (instead of ``delay``), by
                the Redis server's clock, not this machine's; one in the past means
                at once.
        """
        return TaskCaller(
            self,
            _EnqueueOptions(
                id, delay, priority, group, key, replace, queue,
                expires, ttl, debounce, max_wait, keep_last, eta,
            ),
        )  # fmt: skip

    def call(self, *args: P.args, **kwargs: P.kwargs) -> Call[R]:
        """A prepared call, for ``enqueue_many``; as a workflow step, ``s``."""
        return Call(self, args, dict(kwargs))

    if TYPE_CHECKING:  # typed apart: a step may get its first argument from the one before

        def s(self, *args: Any, **kwargs: Any) -> Call[R]:
            """A workflow step (``durq.chain``, ``durq.group``), the same as ``call``: a
            step that runs after another receives that one's result as its first
            positional argument, before ``args``; checked against the signature when
            the workflow is enqueued."""
            ...

    else:
        s = call

    def si(self, *args: Any, **kwargs: Any) -> Call[R]:
        """An immutable workflow step: it runs with exactly ``args`` and ``kwargs``,
        without the previous step's result."""
        return Call(self, args, dict(kwargs), immutable=True)

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> JobHandle[R]:
        """Enqueue one call of this task; returns its handle."""
        return self.app._enqueue(((self, args, kwargs, NO_OPTIONS),))[0]

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> JobHandle[R]:
        """``enqueue`` for asyncio code."""
        return (await self.app._aenqueue(((self, args, kwargs, NO_OPTIONS),)))[0]

    def enqueue_many(
        self, calls: Iterable[Call[R] | tuple[Any, ...] | dict[str, Any]]
    ) -> list[JobHandle[R]]:
        """Enqueue many calls in one round trip per queue. Items are ``task.call(...)``
        results, tuples of positional arguments, or dicts of keyword arguments."""
        return self.app._enqueue(self._task_calls(calls, NO_OPTIONS))

    async def aenqueue_many(
        self, calls: Iterable[Call[R] | tuple[Any, ...] | dict[str, Any]]
    ) -> list[JobHandle[R]]:
        """``enqueue_many`` for asyncio code."""
        return await self.app._aenqueue(self._task_calls(calls, NO_OPTIONS))

    def _task_calls(
        self,
        items: Iterable[Call[Any] | tuple[Any, ...] | dict[str, Any]],
        options: _EnqueueOptions,
    ) -> list[TaskCall]:
        """The items of ``enqueue_many`` as task calls (see ``_task_call``)."""
        listed: list[Any] = items if type(items) is list else list(items)
        if all(type(item) is tuple for item in listed):  # the common bulk form
            return [(self, item, _NO_KWARGS, options) for item in listed]
        return [self._task_call(item, options) for item in listed]

    def _task_call(
        self, item: Call[Any] | tuple[Any, ...] | dict[str, Any], options: _EnqueueOptions
    ) -> TaskCall:
        """An item of ``enqueue_many`` as a task call: a tuple of positional arguments
        or a dict of keyword arguments with ``options``; a ``call(...)`` with its own."""
        if type(item) is tuple:
            return (self, item, _NO_KWARGS, options)
        if isinstance(item, Call):
            return (item.task, item.args, item.kwargs, item.options)
        if isinstance(item, dict):
            return (self, (), dict(item), options)
        raise InvalidArgument(
            f"enqueue_many takes task.call(...) items, tuples of args or dicts of kwargs, "
            f"not {type(item).__name__}"
        )

    def encode(
        self,
        calls: Sequence[TaskCall],
        options: _EnqueueOptions,
        codec: PayloadCodec,
        traced: bool,
    ) -> list[tuple[int, bytes]]:
        """The job payloads of calls of this task with ``options``, each checked and
        encoded with ``codec`` once: ``(codec, data)`` each. The signature check is
        remembered per argument shape; plain JSON arguments take one pass
        (``PayloadCodec.encode_call``); anything else, or a call that carries a trace
        context (``traced``: tracing is on), is checked argument by argument (an error
        names the argument) and encoded whole."""
        out: list[tuple[int, bytes]] = []
        shapes = self._check.shapes
        types = self._types
        name = self.name
        versioned = self.version_meta
        for _task, args, kwargs, _options in calls:
            try:
                problem = shapes[(len(args), *kwargs) if kwargs else len(args)]
            except KeyError:
                problem = self.arguments_problem(args, kwargs)  # remembers it
            if problem is None and types is not None:
                problem = self._types_problem(args, kwargs)
            if problem is not None:
                raise InvalidArgument(problem)
            meta = None
            if traced:  # the job carries the producer's trace context
                meta = tracing.enqueue_meta(name, options.queue or self.queue, options.id)
            if versioned is not None:  # and its task's version
                meta = {**(meta or {}), **versioned}
            encoded = None if meta is not None else codec.encode_call(name, args, kwargs)
            out.append(encoded or codec.encode(self._payload(args, kwargs, meta)))
        return out

    def arguments_problem(self, args: Any, kwargs: Any) -> str | None:
        """Why ``args`` and ``kwargs`` do not fit the function's signature, or None."""
        return self._check.problem(args, kwargs)

    def types_problem(self, args: Sequence[Any], kwargs: dict[str, Any]) -> str | None:
        """Why an argument's value does not fit its type hint, or None (for arguments
        that fit the signature; None too when the task opted out: ``check_types``)."""
        return None if self._types is None else self._types.problem(args, kwargs)

    def _types_problem(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        """Why an argument's value does not fit its type hint, or None; a value that is
        not JSON data at all raises NotSerializable first, as it would without hints."""
        assert self._types is not None
        problem = self._types.problem(args, kwargs)
        if problem is not None:
            self._payload(args, kwargs, None)  # NotSerializable, naming the argument
        return problem

    def message(self, call: Call[Any], meta: Mapping[str, Any] | None = None) -> Message:
        """The queue message for ``call``, with its options: arguments checked, payload
        built (for code that hands a task's job to a queue itself, or checks a call
        early, as ``durq.contrib.django.enqueue_on_commit`` does)."""
        args, kwargs = call.args, call.kwargs
        problem = self.arguments_problem(args, kwargs)
        if problem is None and self._types is not None:
            problem = self._types_problem(args, kwargs)
        if problem is not None:
            raise InvalidArgument(problem)
        o = call.options
        if meta is None:  # the job carries the producer's trace context, if tracing is on
            meta = tracing.enqueue_meta(self.name, o.queue or self.queue, o.id)
        if self.version_meta is not None:  # and its task's version
            meta = {**(meta or {}), **self.version_meta}
        return Message(
            self._payload(args, kwargs, meta),
            o.id,
            o.due,
            o.priority,
            self.config.max_attempts,
            o.group,
            o.key,
            o.replace,
            o.expires,
            o.ttl,
            o.debounce,
            o.max_wait,
            o.keep_last,
        )

    def _payload(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], meta: Mapping[str, Any] | None
    ) -> list[Any]:
        """The payload ``[name, args, kwargs(, meta)]`` of a call whose arguments fit the
        signature, after checking that they are plain JSON data (an error names the
        parameter)."""
        try:
            check_json(list(args), "args")
            check_json(kwargs, "kwargs")
        except NotSerializable:
            # name the parameter, not a position in the payload
            for pname, value in self.signature.bind(*args, **kwargs).arguments.items():
                try:
                    check_json(value, f"argument {pname!r}")
                except NotSerializable as exc:
                    raise NotSerializable(f"{self.name}(): {exc}") from None
            raise
        return build_call(self.name, list(args), kwargs, meta)
