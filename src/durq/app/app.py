"""The App: a registry of tasks and the connection settings they share.

    app = durq.App(url="redis://localhost:6379/0")      # or $DURQ_URL

    @app.task(queue="emails", max_attempts=5, timeout=30)
    def send_email(to: str, subject: str) -> None: ...

    send_email.enqueue("ada@example.com", "hello")       # from the web app
    # durq worker myapp.tasks:app -q emails               # in the worker

Only tasks registered on the app run in its workers; a job naming anything else is
dead-lettered as an unknown task.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal, ParamSpec, TypeVar, overload

from durq._async.queue import AsyncQueue
from durq._async.sharded import AsyncShardedQueue
from durq._sync.queue import Queue
from durq._sync.sharded import ShardedQueue
from durq.app import batch as batch_spec
from durq.app.fleet import FleetGate
from durq.app.handle import JobHandle
from durq.app.hooks import Hooks
from durq.app.jobs import Batch, batches
from durq.app.routes import Routes
from durq.app.schedule_control import Schedules, SyncReport, declare
from durq.app.schedule_spec import Schedule
from durq.app.task import Call, Task, TaskCall, TaskConfig, exception_types
from durq.app.topics import AppTopic
from durq.app.versions import Migration, check_migrations
from durq.backoff import Backoff
from durq.codec import DEFAULT_MAX_PAYLOAD_BYTES, PayloadCodec
from durq.durability import Durability
from durq.errors import InvalidArgument
from durq.keys import check_queue_name, check_shards, shard_name, split_shard
from durq.limits import Rate
from durq.models import EnqueueResult
from durq.protocol.args import delay_ms, lease_ms, new_ids
from durq.protocol.durable import DEFAULT_SIGNAL_TTL
from durq.redaction import Redact
from durq.transport import connection

__all__ = ["App"]

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])


class App:
    """Tasks and the Redis they use.

    Args:
        url: Redis URL; defaults to ``$DURQ_URL``, then ``redis://localhost:6379/0``.
        namespace: the first part of every key (default ``durq``).
        serializer: ``json`` (default), ``msgpack``, or ``pickle`` (only by name).
        max_payload_bytes: the largest encoded job accepted (default 1 MiB).
        default_queue: the queue of tasks that name none (default ``default``).
        lease: default lease of a job in a worker, in seconds (default 30): a worker's
            jobs come back this long after it dies.
        max_attempts: default attempts before a job is dead-lettered (default 5).
        backoff: default retry delays (exponential with jitter, 1 s to 5 min).
        result_ttl: how long results are kept (default 1 h).
        enqueue_retry_for: how long enqueue keeps retrying through connection errors
            (default 10 s); safe because job ids are chosen before the first try.
        durability: make enqueues return only once the write is on N replicas and/or on
            disk (durq.Durability); off by default.
        shards: sharded queues and their shard counts, e.g. ``{"emails": 6}`` (or
            ``@app.task(shards=6)``). A sharded queue's jobs spread over that many
            shards, each in its own Redis Cluster slot; workers consume every shard.
            The count is also recorded in Redis, where workers and tools find it.
        redact: what of task data is secret (``durq.Redact``: argument names and
            patterns), hidden from the worker's logs and from the errors it stores (a
            dead letter's message and traceback); default ``Redact()``, the common
            secret names. ``durq.contrib.fastapi.dashboard`` shows the app's jobs with
            it too.
        unknown_task_grace: seconds a job whose task (at its version) the worker that
            fetched it does not run waits for a worker that does (default 600): it is
            dead-lettered as ``unknown_task`` only once no worker of its queue has run
            that task for as long (docs/deployment.md). 0: dead-lettered at once.
        routes: tasks' queues in one place, as Celery's ``task_routes``: task names,
            or patterns of names or of functions' dotted paths (``"shop.emails.*"``),
            mapped to queues; the first match decides a task's queue when it is
            declared (``durq.app.routes``).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        namespace: str = "durq",
        serializer: str = "json",
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        default_queue: str = "default",
        lease: float = 30.0,
        max_attempts: int = 5,
        backoff: Backoff | None = None,
        result_ttl: float = 3600.0,
        enqueue_retry_for: float = 10.0,
        durability: Durability | None = None,
        shards: Mapping[str, int] | None = None,
        redact: Redact | None = None,
        unknown_task_grace: float = 600.0,
        routes: Mapping[str, str] | None = None,
    ) -> None:
        self.url = connection.resolve_url(url)
        self.namespace = namespace
        self.serializer = serializer
        self.max_payload_bytes = max_payload_bytes
        # the codec of every queue of the app: task calls are encoded with it once
        self.codec = PayloadCodec(serializer, max_payload_bytes)
        self.default_queue = check_queue_name(default_queue)
        lease_ms(lease)
        self.lease = lease
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.result_ttl = result_ttl
        self.enqueue_retry_for = enqueue_retry_for
        self.durability = durability
        delay_ms(unknown_task_grace, "unknown_task_grace")  # checked here, not in a worker
        self.unknown_task_grace = unknown_task_grace
        if redact is not None and not isinstance(redact, Redact):
            raise InvalidArgument(f"redact must be a durq.Redact, got {type(redact).__name__}")
        self.redact = redact if redact is not None else Redact()
        self.routes = Routes(routes)
        self.shards: dict[str, int] = {}
        for queue_name, count in (shards or {}).items():
            self.shard(queue_name, count)
        self.tasks: dict[str, Task[Any, Any]] = {}
        self.topics: dict[str, AppTopic] = {}
        self._queues: dict[str, Queue] = {}
        self._async_queues: dict[str, AsyncQueue] = {}
        self._sharded: dict[str, ShardedQueue] = {}
        self._async_sharded: dict[str, AsyncShardedQueue] = {}
        self._client: Any = None
        self._async_client: Any = None
        self.schedules = Schedules(self)  #: declared schedules, and control of any
        self.hooks = Hooks()  #: the hooks workers run (``on``)
        self._fleet = FleetGate(namespace)  # its old workers, for workflows (app/fleet.py)

    def __repr__(self) -> str:
        return f"<App {connection.redact(self.url)} tasks={sorted(self.tasks)}>"

    # -- tasks ----------------------------------------------------------------------

    @overload
    def task(self, fn: Callable[P, R], /) -> Task[P, R]: ...

    @overload
    def task(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        queue: str | None = None,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
        timeout: float | None = None,
        lease: float | None = None,
        result: bool = False,
        result_ttl: float | None = None,
        shards: int | None = None,
        pool: Literal["thread", "process"] | None = None,
        retry_on: type[Exception] | tuple[type[Exception], ...] = Exception,
        dont_retry_on: type[Exception] | tuple[type[Exception], ...] = (),
        check_types: bool = True,
        rate: Rate | None = None,
        version: int = 1,
        migrate: Mapping[int, Migration] | None = None,
        batch: batch_spec.Batch,
    ) -> Callable[[Callable[[list[batch_spec.Item]], Any]], Task[..., Any]]: ...

    @overload
    def task(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        queue: str | None = None,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
        timeout: float | None = None,
        lease: float | None = None,
        result: bool = False,
        result_ttl: float | None = None,
        shards: int | None = None,
        pool: Literal["thread", "process"] | None = None,
        retry_on: type[Exception] | tuple[type[Exception], ...] = Exception,
        dont_retry_on: type[Exception] | tuple[type[Exception], ...] = (),
        check_types: bool = True,
        rate: Rate | None = None,
        version: int = 1,
        migrate: Mapping[int, Migration] | None = None,
        batch: None = None,
    ) -> Callable[[Callable[P, R]], Task[P, R]]: ...

    def task(
        self,
        fn: Callable[P, R] | None = None,
        /,
        *,
        name: str | None = None,
        queue: str | None = None,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
        timeout: float | None = None,
        lease: float | None = None,
        result: bool = False,
        result_ttl: float | None = None,
        shards: int | None = None,
        pool: Literal["thread", "process"] | None = None,
        retry_on: type[Exception] | tuple[type[Exception], ...] = Exception,
        dont_retry_on: type[Exception] | tuple[type[Exception], ...] = (),
        check_types: bool = True,
        rate: Rate | None = None,
        version: int = 1,
        migrate: Mapping[int, Migration] | None = None,
        batch: batch_spec.Batch | None = None,
    ) -> Task[P, R] | Callable[[Callable[P, R]], Task[P, R]]:
        """Register a sync or async function as a task (a decorator, with or without
        arguments).

        Args:
            name: the name jobs carry (default: the function's ``__name__``).
            queue: the queue its jobs go to (default: the app's default queue).
            max_attempts: attempts before dead-lettering (default: the app's).
            backoff: retry delays after failures (default: the app's).
            timeout: seconds a run may take; an async run is cancelled, a sync one is
                abandoned and counted as failed; either way the worker stays healthy.
            lease: the job's lease while it runs (default: the app's); a worker extends
                it while alive, so this bounds recovery after a crash, not run time.
            result: store the return value for ``JobHandle.result`` (off by default).
            result_ttl: how long the result is kept (default: the app's).
            shards: make the task's queue a sharded queue of this many shards (see
                ``App``); every task of the queue must agree.
            pool: where a worker runs this sync task: ``"process"`` in a child process
                of its process pool, where a timeout stops it for good (killed and
                replaced) and a crash or a leak cannot take the worker down;
                ``"thread"`` in its threads; default: the worker's ``--pool``
                (docs/process-pool.md). Async tasks run in the worker's event loop.
            retry_on: the exceptions a failed run is retried for (default: every
                ``Exception``); any other dead-letters the job at once.
            dont_retry_on: exceptions never retried, even when ``retry_on`` matches
                (e.g. ``(ValueError, KeyError)`` for bad input). ``durq.Retry`` always
                retries and ``durq.Fail`` never does, whatever these say.
            check_types: check argument values against the function's type hints at
                enqueue (JSON-able hints, ``TypedDict``, dataclasses and pydantic models
                as dicts; see ``durq.app.typecheck``); False skips it.
            rate: a rate limit of this task's own (``durq.Rate``): its jobs go to a
                queue of their own, ``<queue>.<task>``, limited by the queues' limiter
                for all workers together (see ``durq.app.routes``).
            version: the version of the task's arguments (1 by default); each job
                carries the version of the producer that enqueued it. Raise it when a
                change of the signature would not bind the arguments of jobs already
                queued, and give ``migrate``.
            migrate: ``{old_version: upgrade}``, where ``upgrade(args, kwargs)`` returns
                the ``(args, kwargs)`` of the next version: a worker upgrades an older
                job's arguments step by step before running it. A job of a version this
                worker cannot run (newer, or older than its migrations reach) waits for
                a worker that can (docs/deployment.md).
            batch: make it a batch task (``durq.Batch``): its function takes one
                parameter, the list of items (``durq.Item``) of a batch; each enqueued
                call is one item. A batch task owns its queue: no other task may use it.
        """
        _check_task_options(timeout, lease, pool, batch)
        config = TaskConfig(
            queue=check_queue_name(queue or self.default_queue),
            max_attempts=max_attempts,
            backoff=backoff,
            timeout=timeout,
            lease=lease,
            result=result,
            result_ttl=result_ttl,
            pool=pool,
            retry_on=exception_types("retry_on", retry_on),
            dont_retry_on=exception_types("dont_retry_on", dont_retry_on),
            check_types=check_types,
            version=version,
            migrate=check_migrations(version, migrate),
            batch=batch,
        )

        def register(func: Callable[P, R]) -> Task[P, R]:
            task_name = name or func.__name__
            if pool is not None and inspect.iscoroutinefunction(func):
                raise InvalidArgument(
                    f"task {task_name!r} is async: it runs in the worker's event loop, "
                    "not in a pool (pool= is for plain def tasks)"
                )
            if task_name in self.tasks and self.tasks[task_name].fn is not func:
                raise InvalidArgument(f"a task named {task_name!r} is already registered")
            if batch is not None:
                batch_spec.check_batch_function(func, task_name)
            task_config = self._placed(task_name, func, queue, config, rate, shards)
            self._check_owner(task_name, task_config)
            task = Task(self, func, task_name, task_config)
            self.tasks[task_name] = task
            return task

        return register(fn) if fn is not None else register

    def _placed(
        self,
        name: str,
        func: Callable[..., Any],
        queue: str | None,
        config: TaskConfig,
        rate: Rate | None,
        shards: int | None,
    ) -> TaskConfig:
        """``config`` with the queue the task's jobs go to: routed (``App(routes=...)``),
        then a queue of its own for a task with a rate of its own; sharded as asked."""
        routed = self.routes.decide(name, func, queue)
        placed = config if routed is None else replace(config, queue=routed)
        if rate is not None:
            if shards is not None:
                raise InvalidArgument("a task with a rate of its own cannot be sharded")
            placed = replace(placed, queue=self.routes.rated_queue(name, placed.queue, rate))
        if shards is not None:
            self.shard(placed.queue, shards)
        return placed

    def _check_owner(self, name: str, config: TaskConfig) -> None:
        """A batch task owns its queue: refuse a batch task on a queue that other tasks
        use, and any other task on a batch task's queue (InvalidArgument)."""
        for other in self.tasks.values():
            if other.name == name or other.queue != config.queue:
                continue
            if config.batch is not None or other.config.batch is not None:
                owner = other.name if other.config.batch is not None else name
                raise InvalidArgument(
                    f"queue {config.queue!r} is owned by the batch task {owner!r}: a batch "
                    f"task's queue holds its items only, so {name!r} and {other.name!r} "
                    "cannot share it (give one of them another queue)"
                )

    def on(self, event: str) -> Callable[[F], F]:
        """Register a hook (a decorator): ``@app.on("task_failure")`` runs the function
        in the worker when a job fails for good, with ``(job, exc)``. The events:
        ``worker_start`` ``()``, in each worker process before its first job;
        ``task_start`` ``(job)``; ``task_success`` ``(job, result)``; ``task_retry``
        ``(job, exc)``; ``task_failure`` ``(job, exc)``. ``job`` is the ``durq.Job`` (its
        ``task``, ``id``, ``queue``, ``attempt``). Hooks run in the worker's event loop
        (an ``async def`` hook is awaited; keep a sync one short); one that raises is
        logged and changes nothing. See ``durq.app.hooks``."""

        def register(fn: F) -> F:
            return self.hooks.add(event, fn)

        return register

    def topic(self, name: str) -> AppTopic:
        """The topic ``name``: register subscriber tasks on it and publish events."""
        if name not in self.topics:
            self.topics[name] = AppTopic(self, name)
        return self.topics[name]

    def shard(self, name: str, shards: int) -> None:
        """Declare queue ``name`` sharded over ``shards`` shards (idempotent; a second
        declaration with another count is refused)."""
        check_shards(name, shards)
        if self.shards.setdefault(name, shards) != shards:
            raise InvalidArgument(
                f"queue {name!r} is declared with {self.shards[name]} shards, not {shards}"
            )

    def _shard_count(self, name: str) -> int:
        """The shard count for a shard name (``emails~3``), else 0."""
        base, index = split_shard(name)
        if index is None:
            return 0
        if base not in self.shards:
            raise InvalidArgument(f"{name!r} names a shard of {base!r}, which this app "
                                  "does not declare sharded")  # fmt: skip
        return self.shards[base]

    def shard_names(self, name: str) -> list[str]:
        """The shard queues of ``name`` (``[name]`` when it is not sharded)."""
        count = self.shards.get(name, 0)
        return [shard_name(name, i) for i in range(count)] if count else [name]

    @property
    def queues(self) -> list[str]:
        """The queues of the registered tasks, sorted."""
        return sorted({t.queue for t in self.tasks.values()})

    # -- queues -----------------------------------------------------------------------

    def _queue_options(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "serializer": self.serializer,
            "max_payload_bytes": self.max_payload_bytes,
            "lease": self.lease,
            "max_attempts": self.max_attempts,
            "backoff": self.backoff,
            "result_ttl": self.result_ttl,
            "enqueue_retry_for": self.enqueue_retry_for,
            "durability": self.durability,
        }

    def _not_sharded(self, name: str) -> None:
        if name in self.shards:
            raise InvalidArgument(
                f"queue {name!r} is sharded: use app.sharded_queue({name!r}), or "
                f"app.queue('{name}~<i>') for one shard"
            )

    def handle(self, queue: str, job_id: str) -> JobHandle[Any]:
        """The handle of job ``job_id`` in ``queue`` (for a sharded queue, its shard:
        ``handle.queue``), from an id stored earlier; ``task.handle(job_id)`` also types
        its result."""
        return JobHandle.of(self, queue, job_id)

    def queue(self, name: str) -> Queue:
        """The blocking Queue ``name`` (or one shard, ``name~i``), sharing the app's
        connection pool."""
        if name not in self._queues:
            self._not_sharded(name)
            options = {**self._queue_options(), "shard_count": self._shard_count(name)}
            if self._client is None:
                self._client = connection.sync_client(self.url)
            self._queues[name] = Queue(name, client=self._client, **options)
        return self._queues[name]

    def aqueue(self, name: str, *, client: Any = None) -> AsyncQueue:
        """The AsyncQueue ``name`` (or one shard, ``name~i``). Without ``client`` it
        shares the app's asyncio pool, which belongs to the event loop that first uses
        it."""
        self._not_sharded(name)
        options = {**self._queue_options(), "shard_count": self._shard_count(name)}
        if client is not None:
            return AsyncQueue(name, client=client, **options)
        if name not in self._async_queues:
            if self._async_client is None:
                self._async_client = connection.async_client(self.url)
            self._async_queues[name] = AsyncQueue(name, client=self._async_client, **options)
        return self._async_queues[name]

    def sharded_queue(self, name: str) -> ShardedQueue:
        """The blocking ShardedQueue ``name`` (declared with ``shards``)."""
        if name not in self._sharded:
            if name not in self.shards:
                raise InvalidArgument(f"queue {name!r} is not declared sharded")
            if self._client is None:
                self._client = connection.sync_client(self.url)
            self._sharded[name] = ShardedQueue(
                name, client=self._client, shards=self.shards[name], **self._queue_options()
            )
        return self._sharded[name]

    def asharded_queue(self, name: str) -> AsyncShardedQueue:
        """The AsyncShardedQueue ``name`` (declared with ``shards``), on the app's
        asyncio pool."""
        if name not in self._async_sharded:
            if name not in self.shards:
                raise InvalidArgument(f"queue {name!r} is not declared sharded")
            if self._async_client is None:
                self._async_client = connection.async_client(self.url)
            self._async_sharded[name] = AsyncShardedQueue(
                name, client=self._async_client, shards=self.shards[name],
                **self._queue_options(),
            )  # fmt: skip
        return self._async_sharded[name]

    def async_queue(self, name: str, *, client: Any = None) -> AsyncQueue:
        """Deprecated: ``aqueue`` (every asyncio twin of durq is named with an ``a``)."""
        warnings.warn(
            "App.async_queue is deprecated: use App.aqueue", DeprecationWarning, stacklevel=2
        )
        return self.aqueue(name, client=client)

    def async_sharded_queue(self, name: str) -> AsyncShardedQueue:
        """Deprecated: ``asharded_queue`` (every asyncio twin of durq is named with an
        ``a``)."""
        warnings.warn(
            "App.async_sharded_queue is deprecated: use App.asharded_queue",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.asharded_queue(name)

    def close(self) -> None:
        """Close the blocking connection pool."""
        if self._client is not None:
            self._client.close()
            self._client = None
            self._queues.clear()
            self._sharded.clear()

    async def aclose(self) -> None:
        """Close both connection pools."""
        self.close()
        if self._async_client is not None:
            await self._async_client.aclose()
            self._async_client = None
            self._async_queues.clear()
            self._async_sharded.clear()

    # -- periodic jobs (durq.app.schedule_spec) -----------------------------------------------

    def schedule(
        self,
        name: str,
        task: Task[Any, Any] | str,
        *,
        cron: str | None = None,
        every: float | None = None,
        tz: str | None = None,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        catch_up: str = "latest",
        max_catch_up: int = 100,
        overlap: str = "allow",
        start_at: Any = None,
        end_at: Any = None,
        enabled: bool = True,
        queue: str | None = None,
    ) -> Schedule:
        """Declare a periodic job: ``task(*args, **kwargs)`` at each tick of ``cron`` (5
        fields or an alias like ``@daily``, in time zone ``tz``, default UTC) or
        ``every`` seconds (at least 0.1). Checked now: a bad expression, time zone,
        task or argument list raises InvalidArgument here, not in a worker.

        Args:
            catch_up: after downtime, fire the newest missed tick (``latest``), every
                missed tick up to ``max_catch_up`` (``all``), or none (``none``).
            overlap: ``skip`` a tick while the previous run has not finished, or
                ``allow`` it.
            start_at: an aware datetime or epoch seconds: no tick before it.
            end_at: an aware datetime or epoch seconds: no tick after it.
            enabled: False declares it paused.
            queue: the queue of its jobs (default: the task's).

        Workers of the queue upsert it when they start (or call ``sync_schedules``).
        """
        return declare(
            self, name, task, cron=cron, every=every, tz=tz, args=args, kwargs=kwargs,
            catch_up=catch_up, max_catch_up=max_catch_up, overlap=overlap,
            start_at=start_at, end_at=end_at, enabled=enabled, queue=queue,
        )  # fmt: skip

    def periodic(
        self, *, name: str | None = None, **options: Any
    ) -> Callable[[Callable[P, R]], Task[P, R]]:
        """``@app.periodic(cron="0 3 * * *")`` on a task (or a plain function, which
        becomes a task with default options): ``schedule`` it under ``name`` (default:
        the task's name) with these options."""

        def register(fn: Callable[P, R]) -> Task[P, R]:
            task = fn if isinstance(fn, Task) else self.task(fn)
            self.schedule(name or task.name, task, **options)
            return task

        return register

    def sync_schedules(
        self, queues: Sequence[str] | None = None, *, remove_missing: bool = False
    ) -> SyncReport:
        """Upsert the declared schedules now (workers do it when they start). The report
        lists schedules declared in code before but not any more; ``remove_missing``
        removes them."""
        return self.schedules.upsert(queues, remove_missing=remove_missing)

    # -- signals (durable steps: docs/durable.md) ----------------------------------------

    def signal(
        self,
        name: str,
        payload: Any = None,
        *,
        queue: str | Sequence[str] | None = None,
        ttl: float = DEFAULT_SIGNAL_TTL,
    ) -> int:
        """Send signal ``name`` with ``payload`` (JSON data, at most 64 KiB): every job
        waiting for it (``durq.wait_for``) gets the payload and runs again now, and a
        wait reached within ``ttl`` seconds (a day by default) gets it at once. It goes
        to ``queue`` (a name or several; each shard of a sharded queue), by default to
        every queue of the app's tasks; once per queue, safe to call again. Returns how
        many jobs it made ready (the shards reached through an outbox not counted)."""
        signal_id = new_ids(1)[0]  # one id everywhere: a retried call changes nothing
        woken = 0
        for target in self._signal_targets(queue):
            if target in self.shards:
                woken += self.sharded_queue(target).signal(name, payload, ttl=ttl, id=signal_id)
            else:
                woken += self.queue(target).signal(name, payload, ttl=ttl, id=signal_id)
        return woken

    async def asignal(
        self,
        name: str,
        payload: Any = None,
        *,
        queue: str | Sequence[str] | None = None,
        ttl: float = DEFAULT_SIGNAL_TTL,
    ) -> int:
        """``signal`` for asyncio code."""
        signal_id = new_ids(1)[0]
        woken = 0
        for target in self._signal_targets(queue):
            if target in self.shards:
                queue_ = self.asharded_queue(target)
                woken += await queue_.signal(name, payload, ttl=ttl, id=signal_id)
            else:
                woken += await self.aqueue(target).signal(name, payload, ttl=ttl, id=signal_id)
        return woken

    def _signal_targets(self, queue: str | Sequence[str] | None) -> list[str]:
        if queue is None:
            targets = self.queues
            if not targets:
                raise InvalidArgument(
                    "this app has no tasks, so no queue to signal: name one (queue=...)"
                )
            return targets
        return [check_queue_name(q) for q in ([queue] if isinstance(queue, str) else queue)]

    # -- enqueueing -------------------------------------------------------------------

    def enqueue_calls(self, calls: Iterable[Call[Any]]) -> list[JobHandle[Any]]:
        """Enqueue prepared calls (``task.call(...)``, each with its options), one round
        trip per queue; handles in order."""
        return self._enqueue([(c.task, c.args, c.kwargs, c.options) for c in calls])

    async def aenqueue_calls(self, calls: Iterable[Call[Any]]) -> list[JobHandle[Any]]:
        """``enqueue_calls`` for asyncio code."""
        return await self._aenqueue([(c.task, c.args, c.kwargs, c.options) for c in calls])

    def _enqueue(self, calls: Sequence[TaskCall]) -> list[JobHandle[Any]]:
        """The one way of every task call to Redis (``durq.app.jobs``): checked and
        encoded once, handed to its queue, one round trip per queue; handles in order."""
        handles: list[Any] = [None] * len(calls)
        for batch in batches(self, calls, self.codec):
            name = batch.queue
            if batch.plain and name not in self.shards:
                queue = self.queue(name)
                results = queue.enqueue_encoded(batch.jobs(), max_attempts=batch.max_attempts)
            elif name in self.shards:
                results = self.sharded_queue(name).enqueue_many(batch.messages())
            else:
                results = self.queue(name).enqueue_many(batch.messages())
            self._hand_out(batch, results, handles)
        return handles

    async def _aenqueue(self, calls: Sequence[TaskCall]) -> list[JobHandle[Any]]:
        """``_enqueue`` for asyncio code."""
        handles: list[Any] = [None] * len(calls)
        for batch in batches(self, calls, self.codec):
            name = batch.queue
            if batch.plain and name not in self.shards:
                queue = self.aqueue(name)
                jobs = batch.jobs()
                results = await queue.enqueue_encoded(jobs, max_attempts=batch.max_attempts)
            elif name in self.shards:
                results = await self.asharded_queue(name).enqueue_many(batch.messages())
            else:
                results = await self.aqueue(name).enqueue_many(batch.messages())
            self._hand_out(batch, results, handles)
        return handles

    def _hand_out(self, batch: Batch, results: list[EnqueueResult], handles: list[Any]) -> None:
        """The handles of a batch's jobs, in their places in ``handles``."""
        name, task = batch.queue, batch.task
        if task is not None and len(batch.at) == len(handles):  # every call, one task
            handles[:] = [JobHandle(self, r.queue or name, r, task) for r in results]
            return
        for i, call, result in zip(batch.at, batch.calls, results, strict=True):
            handles[i] = JobHandle(self, result.queue or name, result, call[0])


def _check_task_options(
    timeout: float | None, lease: float | None, pool: str | None, batch: Any
) -> None:
    """Refuse, at declaration, a task option out of range (InvalidArgument)."""
    if timeout is not None and not timeout > 0:
        raise InvalidArgument("timeout must be > 0 seconds")
    if lease is not None:
        lease_ms(lease)
    if pool not in (None, "thread", "process"):
        raise InvalidArgument(f"pool must be 'thread' or 'process', got {pool!r}")
    if batch is not None and not isinstance(batch, batch_spec.Batch):
        raise InvalidArgument(f"batch must be a durq.Batch, got {type(batch).__name__}")
    if batch is not None and pool == "process":
        raise InvalidArgument(
            "a batch task runs in the worker's process (its loop, or a thread for a "
            "plain def): pool='process' is not for batch tasks"
        )
