"""The schedules of an App at run time (``app.schedules``): upserting those declared in
code into Redis, and pausing, resuming, removing, triggering and listing any schedule.
The declaration of one schedule is ``durq.app.schedule_spec``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from durq.app.schedule_spec import Schedule, pinned_queue
from durq.app.task import Task, TaskOwner
from durq.cron import CronTiming
from durq.errors import InvalidArgument
from durq.keys import QueueKeys, split_shard
from durq.models import ScheduleInfo
from durq.protocol import schedules as ops
from durq.protocol.calls import Op

if TYPE_CHECKING:
    from durq._async.sharded import AsyncShardedQueue
    from durq._sync.sharded import ShardedQueue

__all__ = ["ScheduleOwner", "Schedules", "SyncReport", "declare"]


@dataclass
class SyncReport:
    """What ``app.sync_schedules()`` did, by schedule name."""

    created: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    #: schedules declared in code earlier but not any more: (queue, name)
    missing: list[tuple[str, str]] = field(default_factory=list)
    #: missing schedules removed (``remove_missing``): (queue, name)
    removed: list[tuple[str, str]] = field(default_factory=list)
    #: schedules the code now declares in another queue, removed from the old one:
    #: (old queue, name, new queue)
    moved: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, status: str, name: str) -> None:
        """Record ``name`` under ``status`` (created, changed, updated or unchanged)."""
        getattr(self, status).append(name)


class ScheduleOwner(TaskOwner, Protocol):
    """What schedules use of the App that declares them. Typed by this protocol rather
    than by ``App``, which imports this module: no import circle."""

    #: sharded queues by name, and their shard counts
    shards: dict[str, int]
    #: the namespace of the App's queues
    namespace: str
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

    def asharded_queue(self, name: str) -> AsyncShardedQueue:
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

    def _sync(self, plan: dict[str, list[Schedule]], remove_missing: bool) -> Op[SyncReport]:
        """The sync of ``plan`` (queue -> its declared schedules) as one operation, for
        both front ends; its requests name their queue's keys, so a driver sends each to
        its queue's slot.

        A schedule's name is its identity in the app. In each queue of the plan, a
        schedule this code stored earlier (origin "code") and declares nowhere now is
        missing (removed only with ``remove_missing``); one it declares in another queue
        has moved. A declared schedule not stored in its queue may have moved from a
        queue out of the plan: it is looked for in the app's other queues (rare, bounded
        by the app's queues). Either side completes a move: the old copy is removed,
        then the schedule is upserted in its new queue (a tick is never fired in both;
        one due in between is missed), where it keeps a runtime pause or resume of the
        old copy."""
        report = SyncReport()
        todo, moved = yield from self._survey(plan, remove_missing, report)
        for queue, s in todo:
            old = moved.get(s.name, [])
            for copy in old:
                if (yield from self._remove(copy.queue, s.name)):
                    report.moved.append((copy.queue, s.name, queue))
            keys = self._keys(queue)
            status = yield from ops.upsert(keys, s.row(), self._source(s))
            report.add(status, s.name)
            # created anew with the same declared flag: the old copy's runtime state stands
            if (
                old
                and status == "created"
                and old[0].declared_enabled == s.enabled
                and old[0].paused == s.enabled
            ):
                yield from ops.control(keys, "pause" if old[0].paused else "resume", s.name)
        return report

    def _survey(
        self, plan: dict[str, list[Schedule]], remove_missing: bool, report: SyncReport
    ) -> Op[tuple[list[tuple[str, Schedule]], dict[str, list[ScheduleInfo]]]]:
        """What ``_sync`` upserts, (queue, schedule) in order, and the copies each left
        in old queues; reports (and removes, if asked) the missing schedules."""
        homes = {s.name: self.queue_of(s.name) for s in self.declared.values()}
        todo = [(queue, s) for queue, declared in plan.items() for s in declared]
        moved: dict[str, list[ScheduleInfo]] = {}
        stored: set[tuple[str, str]] = set()
        for queue in plan:
            for info in (yield from ops.list_all(self._keys(queue))):
                stored.add((queue, info.name))
                home = homes.get(info.name)
                if info.origin != "code" or home == queue:
                    continue
                if home is None or not self._same(info):
                    # declared nowhere, or the name now runs another task: not taken for
                    # a move (another app may use the name), reported
                    report.missing.append((queue, info.name))
                    if remove_missing and (yield from self._remove(queue, info.name)):
                        report.removed.append((queue, info.name))
                    continue
                if home not in plan and info.name not in moved:  # this sync completes it
                    todo.append((home, self.declared[info.name]))
                moved.setdefault(info.name, []).append(info)
        new = [s.name for queue, s in todo if (queue, s.name) not in stored and s.name not in moved]
        for other in self._queues(None) if new else []:
            if other not in plan:
                for info in (yield from ops.get(self._keys(other), new)):
                    if info.origin == "code" and self._same(info):
                        moved.setdefault(info.name, []).append(info)
        return todo, moved

    def _same(self, info: ScheduleInfo) -> bool:
        """Whether stored ``info`` is a copy of the declared schedule of its name: the
        same task (a move changes the queue, not the task)."""
        declared = self.declared.get(info.name)
        return declared is not None and declared.task.name == info.task

    def _remove(self, queue: str, name: str) -> Op[bool]:
        return bool((yield from ops.control(self._keys(queue), "remove", name)))

    def _keys(self, queue: str) -> QueueKeys:
        """The keys of ``queue`` (a queue or a shard name)."""
        base, index = split_shard(queue)
        count = self.app.shards.get(base, 0) if index is not None else 0
        return QueueKeys(queue, self.app.namespace, count)

    def _to_register(self, plan: dict[str, list[Schedule]]) -> set[str]:
        """The queues (sharded ones by their name) that get schedules: listed in the
        namespace, so `durq schedules list` and the dashboard see them."""
        return {split_shard(queue)[0] for queue, declared in plan.items() if declared}

    # -- blocking

    def upsert(
        self, queues: Sequence[str] | None = None, *, remove_missing: bool = False
    ) -> SyncReport:
        """Upsert the declared schedules (of ``queues``, default all); report (and with
        ``remove_missing`` remove) the schedules declared in code before that are not any
        more, and remove those whose declaration moved to another queue."""
        plan = self._plan(queues)
        for base in self._to_register(plan):
            registered = (
                self.app.sharded_queue(base) if base in self.app.shards else self.app.queue(base)
            )
            registered.register()
        if not plan:
            return SyncReport()
        return self.app.queue(next(iter(plan)))._run(self._sync(plan, remove_missing))

    def all(self, queue: str | None = None) -> list[ScheduleInfo]:
        """Every schedule stored for ``queue`` (default: the app's queues), with state."""
        out: list[ScheduleInfo] = []
        for name in self._queues(None if queue is None else [queue]):
            out += self.app.queue(name).schedules()
        return out

    def get(self, name: str, queue: str | None = None) -> ScheduleInfo | None:
        """Schedule ``name`` as stored, or None."""
        return self.app.queue(self.queue_of(name, queue)).schedule(name)

    def _control(self, action: str, name: str, queue: str | None) -> Any:
        q = self.app.queue(self.queue_of(name, queue))
        result = q.control_schedule(action, name)
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

    async def aupsert(
        self,
        queues: Sequence[str] | None = None,
        *,
        remove_missing: bool = False,
        client: Any = None,
    ) -> SyncReport:
        """``upsert`` for asyncio code (workers call it on start, for their queues)."""
        plan = self._plan(queues)
        for base in self._to_register(plan):
            if base in self.app.shards:
                await self.app.asharded_queue(base).register()
            else:
                await self.app.aqueue(base, client=client).register()
        if not plan:
            return SyncReport()
        q = self.app.aqueue(next(iter(plan)), client=client)
        return await q._run(self._sync(plan, remove_missing))

    async def aget(self, name: str, queue: str | None = None) -> ScheduleInfo | None:
        """``get`` for asyncio code."""
        return await self.app.aqueue(self.queue_of(name, queue)).schedule(name)

    async def _acontrol(self, action: str, name: str, queue: str | None) -> Any:
        q = self.app.aqueue(self.queue_of(name, queue))
        result = await q.control_schedule(action, name)
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
