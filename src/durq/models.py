"""The data durq hands back: dequeued jobs, job details, queue statistics. No IO here.

Times are seconds since the epoch, as floats, read from the Redis server's clock.
"""

from __future__ import annotations

import datetime
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal, Protocol

from durq.codec import PayloadCodec

__all__ = [
    "BatchRecord",
    "CancelResult",
    "CancelStatus",
    "EnqueueResult",
    "EnqueueStatus",
    "GroupInfo",
    "Job",
    "JobInfo",
    "JobControl",
    "JobState",
    "LibraryInfo",
    "Message",
    "Outcome",
    "Parked",
    "Progress",
    "QueueStats",
    "ScheduleInfo",
    "Settle",
    "StepInfo",
    "StoredStep",
    "Trust",
    "WorkflowInfo",
]


class JobState(str, Enum):
    """Where a job is in its life (see the state diagram in docs/design.md)."""

    PENDING = "pending"  #: ready, waiting for a consumer
    DELAYED = "delayed"  #: waiting for its due time (a delay, a retry backoff or a defer)
    ACTIVE = "active"  #: handed to a consumer under a lease
    DEAD = "dead"  #: in the dead-letter set, with a reason
    COMPLETED = "completed"  #: released; kept only when asked, or as an id tombstone
    SUPERSEDED = "superseded"  #: replaced by a newer job with the same key before it started
    CANCELLED = "cancelled"  #: cancelled (``Queue.cancel``): it never runs (again)
    EXPIRED = "expired"  #: not started by its expiry time (``expires``): it never runs
    HELD = "held"  #: waits for a worker that runs its task at its version (deploys)


class EnqueueStatus(str, Enum):
    """What an enqueue did."""

    CREATED = "created"  #: a new job was added
    EXISTS = "exists"  #: a job with this id exists (or finished recently): nothing changed
    DEDUPLICATED = "deduplicated"  #: a not-yet-started job holds the key: nothing changed
    REPLACED = "replaced"  #: added, and it superseded the not-yet-started job with the key
    #: debounce or keep-last: the job of the key that waits to start takes these
    #: arguments (``id`` is that job); no job was added
    UPDATED = "updated"


@dataclass(frozen=True, slots=True)
class EnqueueResult:
    """The outcome of one enqueue.

    Attributes:
        id: the job that will run: the new job, or the existing one for EXISTS and
            DEDUPLICATED.
        status: what happened.
        superseded: for REPLACED, the id of the job that was replaced.
        queue: the shard (``<queue>~<i>``) the job went to, for a sharded queue.
    """

    id: str
    status: EnqueueStatus
    superseded: str | None = None
    queue: str | None = None

    @property
    def created(self) -> bool:
        """True when a new job was added (CREATED or REPLACED)."""
        return self.status in (EnqueueStatus.CREATED, EnqueueStatus.REPLACED)


@dataclass(frozen=True, slots=True)
class Message:
    """A payload with per-job options, for ``enqueue_many``.

    Options left as None take the values given to ``enqueue_many`` or the queue's.
    """

    payload: Any
    id: str | None = None
    #: seconds from now, or an aware datetime (an eta: due then on the server's clock)
    delay: float | datetime.datetime | None = None
    priority: int | None = None
    max_attempts: int | None = None
    group: str | None = None
    key: str | None = None
    replace: bool | None = None
    #: job control (see ``Task.options``): expiry, and the dedup modes throttle
    #: (``ttl``), debounce (``debounce``, ``max_wait``) and keep-last (``keep_last``)
    expires: float | datetime.datetime | None = None
    ttl: float | None = None
    debounce: float | None = None
    max_wait: float | None = None
    keep_last: bool | None = None


class JobControl(Protocol):
    """What a worker attaches to the jobs it runs (``Job.cancelled``, ``Job.progress``):
    one object for all of them, which keeps state only for the jobs that use it."""

    def is_cancelled(self, job: Job) -> bool:
        """True once a cancel of ``job`` was asked."""
        ...

    def progress(self, job: Job, fraction: float, info: Any = None) -> None:
        """Report how far ``job`` got."""
        ...


class Job:
    """A job handed out by ``dequeue``, under a lease held by the caller.

    Pass it back to ``release``, ``requeue``, ``extend`` or ``defer``: the lease token it
    carries fences those calls, so they are refused once the lease was taken over.
    """

    __slots__ = (
        "_codec",
        "_payload",
        "attempt",
        "codec_id",
        "control",
        "data",
        "deliveries",
        "enqueued_at",
        "group",
        "id",
        "key",
        "lease_deadline",
        "max_attempts",
        "priority",
        "queue",
        "schedule",
        "scheduled_at",
        "task",
        "token",
    )

    # Not keyword-only: the worker makes one Job per job it fetches and passes the
    # fields positionally (binding 14 keywords by name costs more: docs/decisions/)
    def __init__(
        self,
        queue: str,
        id: str,
        token: str,
        attempt: int,
        max_attempts: int,
        deliveries: int,
        priority: int,
        group: str | None,
        key: str | None,
        enqueued_at: float,
        lease_deadline: float,
        codec_id: int,
        data: bytes,
        codec: PayloadCodec,
    ) -> None:
        self.queue = queue  #: name of the queue the job came from
        self.id = id  #: the job id
        self.token = token  #: the lease token (changes with every delivery)
        self.attempt = attempt  #: this attempt's number, from 1 (defers do not count)
        self.max_attempts = max_attempts  #: attempts allowed before dead-lettering
        self.deliveries = deliveries  #: times handed out, including this one
        self.priority = priority
        self.group = group
        self.key = key
        self.enqueued_at = enqueued_at
        self.lease_deadline = lease_deadline  #: server time when the lease runs out
        self.codec_id = codec_id
        self.data = data  #: the payload as stored
        self._codec = codec
        self._payload: Any = _UNSET
        #: a periodic job's schedule and tick time (server clock; None for other jobs)
        self.schedule: str | None = None
        self.scheduled_at: float | None = None
        #: set by the worker that runs the job: its cancel flag and progress writer
        self.control: JobControl | None = None
        #: the name of the task it runs (set by the worker once the payload was read)
        self.task: str | None = None

    @property
    def attempts(self) -> int:
        """Same as ``attempt``: the number of this attempt."""
        return self.attempt

    @property
    def codec(self) -> PayloadCodec:
        """The codec of the queue it came from, which decodes its payload."""
        return self._codec

    @property
    def payload(self) -> Any:
        """The decoded payload; raises PayloadError if it cannot be decoded."""
        if self._payload is _UNSET:
            self._payload = self._codec.decode(self.codec_id, self.data)
        return self._payload

    @property
    def cancelled(self) -> bool:
        """True once a cancel of this job was asked while a worker runs it. A sync task
        should check it in its loops and return early: past the worker's
        ``cancel_grace`` its thread is abandoned, as on a timeout. (Always False for a
        job taken with ``dequeue``: see ``Queue.cancel``.)"""
        return self.control is not None and self.control.is_cancelled(self)

    def progress(self, fraction: float, info: Any = None) -> None:
        """Report how far the job got, inside a task run by a worker: ``fraction`` in
        0..1 and ``info``, any small JSON value. Writes are coalesced (a few per second,
        the last value always written) and fenced: raises LeaseLost once another
        worker was handed the job. A job taken with ``dequeue`` reports its progress
        with ``Queue.progress``."""
        if self.control is None:
            raise RuntimeError(
                "Job.progress() works inside a task run by a durq worker; "
                "use Queue.progress(job, ...) for a job taken with dequeue()"
            )
        self.control.progress(self, fraction, info)

    def __repr__(self) -> str:
        return f"<Job {self.queue}/{self.id} attempt={self.attempt}/{self.max_attempts}>"


_UNSET: Any = object()


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a running job got (``Job.progress``): ``fraction`` (0..1), ``info`` (what
    the task added) and ``at``, when it was written (server time)."""

    fraction: float
    info: Any = None
    at: float | None = None


@dataclass(frozen=True, slots=True)
class StoredStep:
    """What a job's runs stored under one name (durable steps, docs/durable.md;
    ``Queue.steps``).

    ``kind``: ``step``, ``sleep`` or ``wait``. ``state``: a step is ``done``; a sleep
    ``asleep`` (its end is still to come) or ``slept``; a wait ``waiting``, ``signalled``
    or ``timed out``. ``at``: when it was recorded (server time); ``until``: a sleep's
    end, a wait's deadline (None: none); ``seconds`` and ``tries``: a step's run time and
    runs (its own retries); ``signal``: a wait's signal; ``value``: a step's result or
    the payload a wait received (JSON data).
    """

    name: str
    kind: str
    state: str
    at: float | None = None
    until: float | None = None
    seconds: float | None = None
    tries: int | None = None
    signal: str | None = None
    value: Any = None


@dataclass(frozen=True, slots=True)
class Parked:
    """The jobs of a queue parked by durable steps now: ``asleep`` (``durq.sleep``) and
    ``waiting`` (``durq.wait_for``); ``Queue.parked``."""

    asleep: int = 0
    waiting: int = 0


class Outcome(str, Enum):
    """What a call did to one job, for the batch methods of the queues
    (``release_many``, ``requeue``, ``requeue_many``, ``extend_many``, ``defer_many``)."""

    OK = "ok"  #: done as asked
    CREATED = "created"  #: a new job (or schedule) was stored
    EXISTS = "exists"  #: a job of that id exists: nothing was added
    DEDUPLICATED = "deduplicated"  #: a pending job holds the dedup key: that job stands
    REPLACED = "replaced"  #: the pending job of the dedup key was replaced
    RETRYING = "retrying"  #: the failed job comes back for another attempt
    DEAD = "dead"  #: the job went to the dead letters
    CANCELLED = "cancelled"  #: the job was (or had been) cancelled
    CANCELLING = "cancelling"  #: the job runs: its worker stops it
    FINISHED = "finished"  #: the job had ended already: nothing changed
    UPDATED = "updated"  #: the job's stored data was updated
    LEASE_LOST = "lease_lost"  #: the caller no longer holds the lease: nothing changed
    NOT_FOUND = "not_found"  #: no such job
    CORRUPT = "corrupt"  #: the job's record is unreadable
    NOT_DEAD = "not_dead"  #: the job is not a dead letter


class CancelStatus(str, Enum):
    """What a cancel did to one job."""

    CANCELLED = "cancelled"  #: it had not started (or waited for a retry): it never runs
    CANCELLING = "cancelling"  #: it runs: its worker stops it, and it ends cancelled
    FINISHED = "finished"  #: it had ended already (see ``state``): nothing changed
    NOT_FOUND = "not_found"  #: the queue has no trace of it


@dataclass(frozen=True, slots=True)
class CancelResult:
    """The outcome of cancelling one job: its ``status``, and the ``state`` it was
    found in (None when the queue has no trace of it)."""

    id: str
    status: CancelStatus
    state: JobState | None = None


@dataclass(frozen=True)
class JobInfo:
    """Everything stored about one job (``Queue.job``, ``Queue.dead_letters``)."""

    id: str
    state: JobState
    priority: int = 0
    group: str | None = None
    key: str | None = None
    attempts: int = 0
    max_attempts: int = 0
    deliveries: int = 0
    failures: int = 0
    enqueued_at: float | None = None
    dequeued_at: float | None = None
    requeued_at: float | None = None
    lease_deadline: float | None = None
    due_at: float | None = None
    died_at: float | None = None
    retained_until: float | None = None
    reason: dict[str, Any] | None = None
    #: its last failures (up to 5), oldest first, each a dict with ``failure`` (its
    #: count), ``attempt``, ``at`` (seconds), ``reason``, ``type``, ``message`` (its
    #: head) and the tail of its ``traceback``;
    #: kept for the queue's result TTL after the latest failure
    errors: tuple[dict[str, Any], ...] = ()
    codec_id: int | None = None
    data: bytes | None = field(default=None, repr=False)
    corrupt: bool = False
    #: job control: the last progress written, the expiry time, whether a cancel was
    #: asked while it runs, and for a keep-last follow-up the job it waits for
    progress: Progress | None = None
    expires_at: float | None = None
    cancel_requested: bool = False
    waits_for: str | None = None

    def payload(self, codec: PayloadCodec | None = None) -> Any:
        """Decode the stored payload (JSON, msgpack or raw bytes unless told otherwise)."""
        if self.data is None or self.codec_id is None:
            return None
        return (codec or PayloadCodec()).decode(self.codec_id, self.data)


@dataclass(frozen=True)
class QueueStats:
    """Sizes and lifetime counters of one queue.

    Sizes: ``pending`` (ready), ``delayed``, ``active``, ``dead``. Counters count since
    the queue was created.
    """

    name: str
    pending: int
    delayed: int
    active: int
    dead: int
    enqueued: int
    completed: int
    failed: int
    retried: int
    dead_lettered: int
    reclaimed: int
    deferred: int
    superseded: int
    deduplicated: int
    replayed: int
    purged: int
    dead_evicted: int
    corrupt: int
    retained: int
    groups: int
    server_time: float
    cancelled: int = 0
    expired: int = 0
    ticks_fired: int = 0
    ticks_skipped: int = 0
    ticks_missed: int = 0
    #: jobs waiting for a worker that runs their task at their version (deploys: the
    #: holding area, docs/deployment.md)
    held: int = 0

    @property
    def size(self) -> int:
        """Jobs not yet finished: pending + delayed + active + held."""
        return self.pending + self.delayed + self.active + self.held


@dataclass(frozen=True)
class GroupInfo:
    """One group of a queue: ready jobs, jobs holding a slot, and its settings."""

    name: str
    ready: int
    active: int
    limit: int | None
    weight: int | None


@dataclass(frozen=True)
class ScheduleInfo:
    """A schedule as stored in Redis, with its state (``schedules list``)."""

    name: str
    queue: str
    task: str
    kind: str
    cron: str | None
    tz: str | None
    every: float | None
    start_at: float | None
    end_at: float | None
    catch_up: str
    max_catch_up: int
    overlap: str
    args: list[Any]
    kwargs: dict[str, Any]
    paused: bool
    ended: bool
    origin: str
    next_due: float | None  #: server time of the next tick (None: paused or ended)
    last_tick: float | None  #: the scheduled time of the last job fired
    last_fired_at: float | None  #: when that job was enqueued
    last_job: str | None
    last_outcome: str | None  #: pending, delayed, active, dead, completed, or finished
    fired: int
    skipped: int  #: ticks skipped by overlap="skip"
    missed: int  #: ticks not fired by the catch-up policy (workers down or busy)
    watermark: float  #: every tick at or before it is done and never fires again
    stored_ticks: int
    spec: str
    version: int
    server_time: float
    #: the ``enabled`` flag its code declared (a runtime pause or resume overrides it
    #: until the declared flag changes)
    declared_enabled: bool = True

    @property
    def state(self) -> str:
        """``paused``, ``ended`` or ``active``."""
        return "paused" if self.paused else "ended" if self.ended else "active"


@dataclass(frozen=True)
class StepInfo:
    """One step of a workflow: its node number, task, queue, job id and state
    (``waiting``: not started yet; ``starting``: its start is on its way to its queue,
    in another slot; ``cancelled``: its workflow failed or was cancelled before it ran,
    or it was stopped; ``done``: finished and gone; else its job's state: pending,
    active, dead...)."""

    node: int
    task: str
    queue: str
    job_id: str
    state: str


@dataclass(frozen=True)
class WorkflowInfo:
    """A workflow as stored: ``state`` is running, completed, failed or cancelled; ``waiting_on``
    maps each open group (node) to how many of its members are still open; ``dead``
    lists the steps whose death the workflow waits out (policy "wait"); ``run`` is the
    tag of its submission, part of its steps' job ids."""

    id: str
    queue: str
    state: str
    policy: str
    created_at: float
    finished_at: float | None
    error: dict[str, Any] | None
    steps: list[StepInfo]
    waiting_on: dict[int, int]
    dead: dict[int, Any]
    plan: Any
    run: str = ""

    @property
    def counts(self) -> dict[str, int]:
        """How many steps are in each state."""
        return dict(Counter(s.state for s in self.steps))


@dataclass(frozen=True)
class LibraryInfo:
    """One of durq's Functions libraries on a server."""

    #: ``durq_<hash>``
    name: str
    #: how many functions (operations) it registers
    functions: int
    #: True for the library of this durq version
    current: bool


class Trust(Enum):
    """How a client may run durq's scripts on a server, as :func:`trust_library` found."""

    #: durq's own library was there, its code exactly this version's: FCALL
    VERIFIED = "verified"
    #: it was missing and this call loaded it: FCALL
    LOADED = "loaded"
    #: the server has no Functions (Redis 6.2): EVALSHA
    NO_FUNCTIONS = "no Functions"
    #: the user may not list (or, the library missing, load) Functions: EVALSHA
    NOT_ALLOWED = "not allowed"
    #: the library is missing and the server, out of memory, refused to load it:
    #: EVALSHA for now, FCALL once it can be loaded
    OUT_OF_MEMORY = "out of memory"


@dataclass(frozen=True, slots=True)
class Settle:
    """How one item of a batch ends, for ``Queue.settle`` (``durq.Batch``; the worker
    settles its batches itself). Made with the class methods: ``Settle.done()``,
    ``Settle.retry(delay, reason)``, ``Settle.dead(reason)``, ``Settle.defer(delay)``,
    ``Settle.rate_limited(retry_after, scope)``."""

    kind: Literal["done", "retry", "dead", "defer", "rate_limited"] = "done"
    #: retry and defer: seconds before it is ready again; rate_limited: the pause
    delay: float = 0.0
    #: retry and dead: why (text or a JSON object), stored as ``requeue`` stores it
    reason: Any = None
    #: done: the result stored for its waiter (encoded, as ``release_many``'s results);
    #: retry and dead: the error stored if it ends dead-lettered
    result: bytes | None = None
    #: rate_limited: what pauses, its group or the whole queue
    scope: Literal["group", "queue"] = "group"

    @classmethod
    def done(cls, result: bytes | None = None) -> Settle:
        """Completed (its encoded ``result`` stored, if given)."""
        return cls("done", result=result)

    @classmethod
    def retry(cls, delay: float = 0.0, reason: Any = None) -> Settle:
        """Failed: the attempt counts; back after ``delay`` seconds, or dead-lettered
        once its attempts are spent."""
        return cls("retry", delay=delay, reason=reason)

    @classmethod
    def dead(cls, reason: Any = None) -> Settle:
        """Failed for good: dead-lettered now with ``reason``."""
        return cls("dead", reason=reason)

    @classmethod
    def defer(cls, delay: float = 0.0) -> Settle:
        """Given back for ``delay`` seconds without counting an attempt."""
        return cls("defer", delay=delay)

    @classmethod
    def rate_limited(
        cls, retry_after: float = 0.0, scope: Literal["group", "queue"] = "group"
    ) -> Settle:
        """Given back at once without counting an attempt, its ``scope`` paused for
        ``retry_after`` seconds (``durq.RateLimited``)."""
        return cls("rate_limited", delay=retry_after, scope=scope)


@dataclass(frozen=True, slots=True)
class BatchRecord:
    """One batch in a queue's history (``Queue.batches()``): when it was settled (server
    time, seconds), its items, and why it started: ``size`` (``max_size`` items) or
    ``wait`` (``max_wait`` after its first item)."""

    at: float
    size: int
    cause: str
