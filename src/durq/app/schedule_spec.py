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
the jump, an ambiguous time fires once (``durq.cron``). Runtime control of stored
schedules (``app.schedules``) is in ``durq.app.schedule_control``. See docs/schedules.md.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson

from durq.app.task import Task
from durq.codec import check_json
from durq.cron import CronTiming
from durq.errors import InvalidArgument, NotSerializable
from durq.keys import shard_index, shard_name
from durq.models import ScheduleInfo
from durq.protocol.schedules import ScheduleRow

if TYPE_CHECKING:
    from durq.models import Job

__all__ = [
    "Schedule",
    "ScheduleInfo",
    "apply_tick",
    "pinned_queue",
    "schedule_job_id",
]

CATCH_UP = ("latest", "all", "none")
OVERLAP = ("allow", "skip")
MIN_EVERY = 0.1
MAX_EVERY = 10 * 365 * 86400.0
MAX_CATCH_UP = 1000
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")
_NONE_GRACE_MS = 60_000  # the most a tick may be late and still fire under catch_up="none"


def schedule_job_id(name: str, tick: float) -> str:
    """The id of the job of schedule ``name``'s tick at ``tick`` (seconds since the
    epoch): the same in every worker, so a tick's job can be found and is never two."""
    return f"sched:{name}@{round(tick * 1000)}"


def pinned_queue(queue: str, name: str, shards: int) -> str:
    """The queue (the shard, for a sharded queue) that holds schedule ``name``: a
    schedule is pinned to one shard by its name, so one shard's consumers fire it."""
    return shard_name(queue, shard_index(name, shards)) if shards else queue


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
        problem = task.types_problem(list(self.args), self.kwargs)  # the type hints
        if problem is not None:
            raise InvalidArgument(f"{where}: {problem}")
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
        version = self.task.version_meta  # the job's version, for a versioned task
        meta = b"" if version is None else orjson.dumps(version)[1:-1] + b","
        return body[:-1] + b",{" + meta + b'"schedule":' + orjson.dumps(self.name) + b',"tick":'

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


def apply_tick(job: Job, meta: Mapping[str, Any]) -> None:
    """Give a scheduled job its schedule and tick time (from its payload's metadata),
    for ``durq.current_job()``."""
    tick = meta.get("tick")
    if isinstance(tick, int) and not isinstance(tick, bool):
        job.scheduled_at = tick / 1000
        schedule = meta.get("schedule")
        job.schedule = schedule if isinstance(schedule, str) else None
