"""Periodic jobs: cron and interval schedules with exactly one job per tick.

    @app.periodic(cron="0 3 * * *", tz="Europe/Berlin")
    @app.task
    def nightly_report() -> None: ...

    app.schedule("sync-crm", sync_crm, every=10, args=("eu",), overlap="skip")

Schedules declared in code are upserted when a worker of their queue starts (and by
``app.sync_schedules()``). The workers that consume the queue fire the ticks inside their
dequeue script, so there is no beat process and no leader; a watermark in the schedule's
state (the last tick done) makes each tick fire once however many workers run, crash or
restart. Cron expressions are evaluated with cronsim in the schedule's IANA time zone,
with Debian cron's DST rules: a time skipped by spring-forward fires once right after
the jump, an ambiguous time fires once. See docs/schedules.md.
"""

from __future__ import annotations

import math
import re
import zoneinfo
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone, tzinfo
from typing import TYPE_CHECKING, Any, Protocol

import orjson
from cronsim import CronSim, CronSimError

from durq._async.sharded import shard_index
from durq.codec import check_json
from durq.errors import InvalidArgument, NotSerializable
from durq.keys import shard_name, split_shard
from durq.protocol import schedules as ops
from durq.protocol.schedules import CRON_TICKS, ScheduleInfo, ScheduleRow
from durq.task import Task, TaskOwner

if TYPE_CHECKING:
    from durq._async.sharded import AsyncShardedQueue
    from durq._sync.queue import Queue
    from durq._sync.sharded import ShardedQueue
    from durq.models import Job

__all__ = [
    "CronTiming",
    "Schedule",
    "ScheduleInfo",
    "Schedules",
    "SyncReport",
    "pinned_queue",
    "schedule_job_id",
]

CATCH_UP = ("latest", "all", "none")
OVERLAP = ("allow", "skip")
MIN_EVERY = 0.1
MAX_EVERY = 10 * 365 * 86400.0
MAX_CATCH_UP = 1000
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")
_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_FOREVER = 2**52  # a horizon for a cron schedule that has no tick left
_COUNT_LIMIT = 5000  # past ticks counted at most when reporting how many were missed
_NONE_GRACE_MS = 60_000  # the most a tick may be late and still fire under catch_up="none"


def schedule_job_id(name: str, tick: float) -> str:
    """The id of the job of schedule ``name``'s tick at ``tick`` (seconds since the
    epoch): the same in every worker, so a tick's job can be found and is never two."""
    return f"sched:{name}@{round(tick * 1000)}"


def pinned_queue(queue: str, name: str, shards: int) -> str:
    """The queue (the shard, for a sharded queue) that holds schedule ``name``: a
    schedule is pinned to one shard by its name, so one shard's consumers fire it."""
    return shard_name(queue, shard_index(name, shards)) if shards else queue


# -- cron -------------------------------------------------------------------------------


def _zone(tz: str | None) -> tzinfo:
    if tz is None or tz == "UTC":
        return timezone.utc
    if not isinstance(tz, str):
        raise InvalidArgument(f"tz must be an IANA time zone name, got {tz!r}")
    try:
        return zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise InvalidArgument(
            f"unknown time zone {tz!r} (an IANA name, e.g. Europe/Berlin)"
        ) from None


def _ms(dt: datetime) -> int:
    return int(dt.timestamp()) * 1000


class CronTiming:
    """The ticks of a 5-field cron expression in a time zone (a TickSource).

    Evaluated with cronsim: minute, hour, day of month, month, day of week, with
    Debian cron's rules for DST (skipped times fire right after the jump, ambiguous
    times fire once) and for day-of-month/day-of-week.
    """

    def __init__(
        self, expr: str, tz: str | None = None, start_ms: int = 0, end_ms: int = 0
    ) -> None:
        if not isinstance(expr, str):
            raise InvalidArgument(f"cron must be a string, got {expr!r}")
        text = " ".join(expr.split())
        text = _ALIASES.get(text.lower(), text)
        if text.startswith("@"):
            raise InvalidArgument(
                f"invalid cron expression {expr!r}: aliases are {', '.join(sorted(_ALIASES))}"
            )
        if len(text.split()) != 5:
            raise InvalidArgument(
                f"invalid cron expression {expr!r}: it needs 5 fields (minute hour "
                "day-of-month month day-of-week); for sub-minute periods use every="
            )
        self.expr = text
        self.tz_name = tz
        self.zone = _zone(tz)
        self.start_ms = start_ms
        self.end_ms = end_ms
        try:
            first = next(self._iter(0), None)
        except (CronSimError, ValueError) as exc:
            raise InvalidArgument(f"invalid cron expression {expr!r}: {exc}") from None
        if first is None:
            raise InvalidArgument(f"cron expression {expr!r} never fires")

    def _iter(self, after_ms: int, reverse: bool = False) -> Iterator[int]:
        """Tick times (ms) after ``after_ms`` (before it when ``reverse``), strictly
        monotonic (a wall-clock time that maps to one instant twice is given once)."""
        start = datetime.fromtimestamp(after_ms / 1000, self.zone)
        if reverse:
            start += timedelta(microseconds=1)  # so a tick at after_ms itself comes first
        last: int | None = None
        try:
            for dt in CronSim(self.expr, start, reverse=reverse):
                t = _ms(dt)
                if last is not None and (t >= last if reverse else t <= last):
                    continue
                if (t > after_ms) if reverse else (t <= after_ms):
                    continue
                last = t
                yield t
        except StopIteration:  # cronsim gives up after 50 years without a match
            return

    def next_ticks(self, after_ms: int, count: int) -> list[int]:
        """The next ``count`` ticks after ``after_ms`` (ms), ignoring start and end."""
        out: list[int] = []
        for t in self._iter(after_ms):
            out.append(t)
            if len(out) >= count:
                break
        return out

    def ticks(self, after_ms: int, now_ms: int, keep_past: int) -> tuple[list[int], int, int]:
        """TickSource.ticks: past ticks (the newest ``keep_past``), then future ones."""
        low = max(after_ms, self.start_ms - 1)
        past: list[int] = []
        dropped = 0
        if low < now_ms:
            if keep_past > 0:
                for t in self._iter(now_ms, reverse=True):
                    if t <= low or len(past) >= keep_past:
                        break
                    past.append(t)
                past.reverse()
            oldest = past[0] if past else now_ms + 1
            for t in self._iter(low):
                if t >= oldest or dropped >= _COUNT_LIMIT:
                    break
                dropped += 1
            low = now_ms
        future = self.next_ticks(low, CRON_TICKS)
        if self.end_ms:
            past = [t for t in past if t <= self.end_ms]
            if not future or future[-1] >= self.end_ms:
                future = [t for t in future if t <= self.end_ms]
                return past + future, max(self.end_ms, now_ms), dropped
        horizon = future[-1] if future else _FOREVER
        return past + future, horizon, dropped


# -- declaration ------------------------------------------------------------------------


def _epoch_ms(value: Any, what: str) -> int:
    if value is None:
        return 0
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidArgument(f"{what} must be a timezone-aware datetime, got {value!r}")
        return round(value.timestamp() * 1000)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return round(value * 1000)
    raise InvalidArgument(f"{what} must be an aware datetime or epoch seconds, got {value!r}")


@dataclass(frozen=True)
class Schedule:
    """A periodic job declared in code (``app.schedule`` or ``@app.periodic``),
    validated when declared."""

    name: str
    task: Task[Any, Any]
    queue: str
    cron: str | None = None
    every: float | None = None
    tz: str | None = None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    catch_up: str = "latest"
    max_catch_up: int = 100
    overlap: str = "allow"
    start_at: datetime | float | None = None
    end_at: datetime | float | None = None
    enabled: bool = True

    def __post_init__(self) -> None:
        where = f"schedule {self.name!r}"
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise InvalidArgument(
                f"schedule name {self.name!r}: 1-128 letters, digits, '_', '.', ':' or '-'"
            )
        self._check_timing(where)
        self._check_policies(where)
        self._check_call(where)

    def _check_timing(self, where: str) -> None:
        if (self.cron is None) == (self.every is None):
            raise InvalidArgument(f"{where}: give exactly one of cron= and every=")
        if self.every is not None:
            if (
                isinstance(self.every, bool)
                or not isinstance(self.every, (int, float))
                or not math.isfinite(self.every)
                or not MIN_EVERY <= self.every <= MAX_EVERY
            ):
                raise InvalidArgument(
                    f"{where}: every must be seconds in {MIN_EVERY}..{MAX_EVERY:g}, "
                    f"got {self.every!r}"
                )
            if self.tz is not None:
                raise InvalidArgument(f"{where}: tz applies to cron schedules only")
        start, end = self.start_ms, self.end_ms
        if start and end and end <= start:
            raise InvalidArgument(f"{where}: end_at must be after start_at")
        if self.cron is not None:
            self.timing()  # parses the expression and the time zone

    def _check_policies(self, where: str) -> None:
        if self.catch_up not in CATCH_UP:
            raise InvalidArgument(
                f"{where}: catch_up must be one of {CATCH_UP}, got {self.catch_up!r}"
            )
        if self.overlap not in OVERLAP:
            raise InvalidArgument(
                f"{where}: overlap must be one of {OVERLAP}, got {self.overlap!r}"
            )
        if (
            isinstance(self.max_catch_up, bool)
            or not isinstance(self.max_catch_up, int)
            or not 1 <= self.max_catch_up <= MAX_CATCH_UP
        ):
            raise InvalidArgument(f"{where}: max_catch_up must be an int in 1..{MAX_CATCH_UP}")
        if not isinstance(self.enabled, bool):
            raise InvalidArgument(f"{where}: enabled must be True or False")

    def _check_call(self, where: str) -> None:
        task = self.task
        if task.app.tasks.get(task.name) is not task:
            raise InvalidArgument(f"{where}: task {task.name!r} is not registered in this app")
        problem = task.arguments_problem(list(self.args), self.kwargs)
        if problem is not None:
            raise InvalidArgument(f"{where}: {problem}")
        try:
            check_json(list(self.args), "args")
            check_json(self.kwargs, "kwargs")
        except NotSerializable as exc:
            raise InvalidArgument(f"{where}: {exc}") from None
        size = len(self.head()) + 32
        if size > task.app.max_payload_bytes:
            raise InvalidArgument(f"{where}: its job payload of {size} bytes is over the limit")

    @property
    def start_ms(self) -> int:
        """``start_at`` in epoch ms (0: none)."""
        return _epoch_ms(self.start_at, "start_at")

    @property
    def end_ms(self) -> int:
        """``end_at`` in epoch ms (0: none)."""
        return _epoch_ms(self.end_at, "end_at")

    def timing(self) -> CronTiming:
        """The cron evaluation of this schedule (cron schedules only)."""
        if self.cron is None:
            raise InvalidArgument(f"schedule {self.name!r} is not a cron schedule")
        return CronTiming(self.cron, self.tz, self.start_ms, self.end_ms)

    def spec(self) -> str:
        """The timing identity: a change of it re-plans the ticks from the next one."""
        if self.cron is not None:
            timing = self.timing()
            head = f"cron|{timing.expr}|{self.tz or 'UTC'}"
        else:
            head = f"every|{round(float(self.every or 0) * 1000)}"
        return f"{head}|{self.start_ms}|{self.end_ms}"

    def head(self) -> bytes:
        """The job payload up to its tick time: ``[task, args, kwargs, {"schedule":
        name, "tick": `` (the dequeue script appends the tick's ms and ``}]``)."""
        body = orjson.dumps([self.task.name, list(self.args), self.kwargs])
        return body[:-1] + b',{"schedule":' + orjson.dumps(self.name) + b',"tick":'

    def row(self, origin: str = "code") -> ScheduleRow:
        """What the upsert script stores."""
        every_ms = round(float(self.every) * 1000) if self.every is not None else 0
        grace = min(every_ms // 2, _NONE_GRACE_MS) if every_ms else _NONE_GRACE_MS // 2
        info: dict[str, Any] = {
            "cron": self.timing().expr if self.cron is not None else None,
            "tz": self.tz,
            "every": self.every,
            "start_at": self.start_ms / 1000 if self.start_ms else None,
            "end_at": self.end_ms / 1000 if self.end_ms else None,
            "args": list(self.args),
            "kwargs": self.kwargs,
        }
        return ScheduleRow(
            name=self.name,
            spec=self.spec(),
            kind="cron" if self.cron is not None else "every",
            every_ms=every_ms,
            start_ms=self.start_ms,
            end_ms=self.end_ms,
            catch_up=self.catch_up,
            max_catch_up=self.max_catch_up,
            grace_ms=grace,
            overlap=self.overlap,
            head=self.head(),
            max_attempts=self.task.config.max_attempts or self.task.app.max_attempts,
            enabled=self.enabled,
            origin=origin,
            task=self.task.name,
            info=info,
        )


def timing_of(info: ScheduleInfo) -> CronTiming | None:
    """The tick source of a stored cron schedule (for refills), None if unreadable."""
    if info.kind != "cron" or not info.cron:
        return None
    try:
        return CronTiming(
            info.cron,
            info.tz,
            round((info.start_at or 0) * 1000),
            round((info.end_at or 0) * 1000),
        )
    except InvalidArgument:
        return None


def apply_tick(job: Job, meta: Mapping[str, Any]) -> None:
    """Give a scheduled job its schedule and tick time (from its payload's metadata),
    for ``durq.current_job()``."""
    tick = meta.get("tick")
    if isinstance(tick, int) and not isinstance(tick, bool):
        job.scheduled_at = tick / 1000
        schedule = meta.get("schedule")
        job.schedule = schedule if isinstance(schedule, str) else None


# -- the app's schedules -------------------------------------------------------------------


@dataclass
class SyncReport:
    """What ``app.sync_schedules()`` did, by schedule name."""

    created: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    #: schedules declared in code earlier but not any more: (queue, name)
    missing: list[tuple[str, str]] = field(default_factory=list)
    removed: list[tuple[str, str]] = field(default_factory=list)

    def add(self, status: str, name: str) -> None:
        """Record ``name`` under ``status`` (created, changed, updated or unchanged)."""
        getattr(self, status).append(name)


class ScheduleOwner(TaskOwner, Protocol):
    """What schedules use of the App that declares them. Typed by this protocol rather
    than by ``App``, which imports this module: no import circle."""

    #: sharded queues by name, and their shard counts
    shards: dict[str, int]
    #: the App's schedules
    schedules: Schedules

    @property
    def queues(self) -> list[str]:
        """The queues of the registered tasks, sorted."""
        ...

    def shard_names(self, name: str) -> list[str]:
        """The shard queues of ``name`` (``[name]`` when it is not sharded)."""
        ...

    def sharded_queue(self, name: str) -> ShardedQueue:
        """The blocking ShardedQueue ``name``."""
        ...

    def async_sharded_queue(self, name: str) -> AsyncShardedQueue:
        """The AsyncShardedQueue ``name``."""
        ...


class Schedules:
    """The schedules of an App: those declared in code (``declared``) and runtime
    control of any schedule by name (``app.schedules.pause("nightly")``). Every method
    has an ``a``-prefixed asyncio twin."""

    def __init__(self, app: ScheduleOwner) -> None:
        self.app = app
        self.declared: dict[str, Schedule] = {}

    def add(self, schedule: Schedule) -> Schedule:
        if schedule.name in self.declared:
            raise InvalidArgument(f"schedule {schedule.name!r} is declared twice")
        self.declared[schedule.name] = schedule
        return schedule

    # -- where schedules live

    def queue_of(self, name: str, queue: str | None = None) -> str:
        """The queue (or shard) holding schedule ``name``: its declared queue, else
        ``queue``."""
        if queue is None:
            declared = self.declared.get(name)
            if declared is None:
                raise InvalidArgument(
                    f"schedule {name!r} is not declared in this app: name its queue"
                )
            queue = declared.queue
        return pinned_queue(queue, name, self.app.shards.get(queue, 0))

    def _queues(self, queues: Sequence[str] | None) -> list[str]:
        names = (
            list(queues)
            if queues is not None
            else sorted({s.queue for s in self.declared.values()} | set(self.app.queues))
        )
        return [q for name in names for q in self.app.shard_names(name)]

    def _plan(self, queues: Sequence[str] | None) -> dict[str, list[Schedule]]:
        wanted = set(queues) if queues is not None else None
        plan: dict[str, list[Schedule]] = {q: [] for q in self._queues(queues)}
        for s in self.declared.values():
            if wanted is None or s.queue in wanted:
                plan.setdefault(self.queue_of(s.name), []).append(s)
        return plan

    @staticmethod
    def _source(s: Schedule) -> CronTiming | None:
        return s.timing() if s.cron is not None else None

    # -- blocking

    def sync(
        self, queues: Sequence[str] | None = None, *, remove_missing: bool = False
    ) -> SyncReport:
        """Upsert the declared schedules (of ``queues``, default all) and report the
        schedules declared in code before that are not any more; with
        ``remove_missing`` remove them."""
        report = SyncReport()
        plan = self._plan(queues)
        for base in {split_shard(queue)[0] for queue, declared in plan.items() if declared}:
            # listed in the namespace, so `durq schedules list` and the dashboard see it
            registered = (
                self.app.sharded_queue(base) if base in self.app.shards else self.app.queue(base)
            )
            registered.register()
        for queue, declared in plan.items():
            q = self.app.queue(queue)
            for s in declared:
                report.add(q.run(ops.upsert(q.keys, s.row(), self._source(s))), s.name)
            for info in self._stored(q):
                if info.origin == "code" and info.name not in self.declared:
                    report.missing.append((queue, info.name))
                    if remove_missing and q.run(ops.control(q.keys, "remove", info.name)):
                        report.removed.append((queue, info.name))
        return report

    @staticmethod
    def _stored(q: Queue) -> list[ScheduleInfo]:
        out: list[ScheduleInfo] = []
        while True:
            total, items = q.run(ops.list_page(q.keys, len(out), 1000))
            out += items
            if not items or len(out) >= total:
                return out

    def all(self, queue: str | None = None) -> list[ScheduleInfo]:
        """Every schedule stored for ``queue`` (default: the app's queues), with state."""
        out: list[ScheduleInfo] = []
        for name in self._queues(None if queue is None else [queue]):
            out += self._stored(self.app.queue(name))
        return out

    def get(self, name: str, queue: str | None = None) -> ScheduleInfo | None:
        """Schedule ``name`` as stored, or None."""
        q = self.app.queue(self.queue_of(name, queue))
        found = q.run(ops.get(q.keys, [name]))
        return found[0] if found else None

    def _control(self, action: str, name: str, queue: str | None) -> Any:
        q = self.app.queue(self.queue_of(name, queue))
        result = q.run(ops.control(q.keys, action, name))
        if result is None:
            raise KeyError(f"no schedule {name!r} in queue {q.name!r}")
        return result

    def pause(self, name: str, queue: str | None = None) -> None:
        """Stop firing ticks until ``resume`` (a worker restart does not resume it)."""
        self._control("pause", name, queue)

    def resume(self, name: str, queue: str | None = None) -> float | None:
        """Fire again from the next tick (the ticks of the pause are skipped); returns
        the next tick's time, None if the schedule has ended."""
        return self._control("resume", name, queue) or None

    def remove(self, name: str, queue: str | None = None) -> None:
        """Delete the schedule and its state (a worker whose code declares it creates it
        again, as new)."""
        self._control("remove", name, queue)

    def trigger(self, name: str, queue: str | None = None) -> str:
        """Enqueue the schedule's job now, besides its ticks; returns the job id."""
        job_id: str = self._control("trigger", name, queue)
        return job_id

    # -- asyncio

    async def async_sync(
        self,
        queues: Sequence[str] | None = None,
        *,
        remove_missing: bool = False,
        client: Any = None,
    ) -> SyncReport:
        """``sync`` for asyncio code (workers call it on start, for their queues)."""
        report = SyncReport()
        plan = self._plan(queues)
        for base in {split_shard(queue)[0] for queue, declared in plan.items() if declared}:
            if base in self.app.shards:
                await self.app.async_sharded_queue(base).register()
            else:
                await self.app.async_queue(base, client=client).register()
        for queue, declared in plan.items():
            q = self.app.async_queue(queue, client=client)
            for s in declared:
                report.add(await q.run(ops.upsert(q.keys, s.row(), self._source(s))), s.name)
            offset, listed = 0, []
            while True:
                total, items = await q.run(ops.list_page(q.keys, offset, 1000))
                listed += items
                offset += len(items)
                if not items or offset >= total:
                    break
            for info in listed:
                if info.origin == "code" and info.name not in self.declared:
                    report.missing.append((queue, info.name))
                    if remove_missing and await q.run(ops.control(q.keys, "remove", info.name)):
                        report.removed.append((queue, info.name))
        return report

    async def aget(self, name: str, queue: str | None = None) -> ScheduleInfo | None:
        """``get`` for asyncio code."""
        q = self.app.async_queue(self.queue_of(name, queue))
        found = await q.run(ops.get(q.keys, [name]))
        return found[0] if found else None

    async def _acontrol(self, action: str, name: str, queue: str | None) -> Any:
        q = self.app.async_queue(self.queue_of(name, queue))
        result = await q.run(ops.control(q.keys, action, name))
        if result is None:
            raise KeyError(f"no schedule {name!r} in queue {q.name!r}")
        return result

    async def apause(self, name: str, queue: str | None = None) -> None:
        """``pause`` for asyncio code."""
        await self._acontrol("pause", name, queue)

    async def aresume(self, name: str, queue: str | None = None) -> float | None:
        """``resume`` for asyncio code."""
        return (await self._acontrol("resume", name, queue)) or None

    async def aremove(self, name: str, queue: str | None = None) -> None:
        """``remove`` for asyncio code."""
        await self._acontrol("remove", name, queue)

    async def atrigger(self, name: str, queue: str | None = None) -> str:
        """``trigger`` for asyncio code."""
        job_id: str = await self._acontrol("trigger", name, queue)
        return job_id


def declare(
    app: ScheduleOwner,
    name: str,
    task: Task[Any, Any] | str,
    *,
    cron: str | None,
    every: float | None,
    tz: str | None,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None,
    catch_up: str,
    max_catch_up: int,
    overlap: str,
    start_at: datetime | float | None,
    end_at: datetime | float | None,
    enabled: bool,
    queue: str | None,
) -> Schedule:
    """Validate and record one schedule of ``app`` (``App.schedule``)."""
    if isinstance(task, str):
        found = app.tasks.get(task)
        if found is None:
            raise InvalidArgument(f"schedule {name!r}: no task named {task!r} is registered")
        task = found
    if not isinstance(task, Task):
        raise InvalidArgument(
            f"schedule {name!r}: task must be a task of this app (declared with @app.task), "
            f"got {task!r}"
        )
    if task.app is not app:
        raise InvalidArgument(
            f"schedule {name!r}: task {task.name!r} is not registered in this app"
        )
    if not isinstance(args, (list, tuple)) or not isinstance(kwargs or {}, Mapping):
        raise InvalidArgument(f"schedule {name!r}: args must be a sequence, kwargs a mapping")
    schedule = Schedule(
        name=name,
        task=task,
        queue=queue or task.queue,
        cron=cron,
        every=every,
        tz=tz,
        args=tuple(args),
        kwargs=dict(kwargs or {}),
        catch_up=catch_up,
        max_catch_up=max_catch_up,
        overlap=overlap,
        start_at=start_at,
        end_at=end_at,
        enabled=enabled,
    )
    return app.schedules.add(schedule)
