"""ShardedQueueAdmin: job control and inspection of a sharded queue (a part of
``ShardedQueue``, as ``QueueAdmin`` is of ``Queue``), used from blocking code.

GENERATED from durq/_async/sharded_admin.py by scripts/unasync.py: edit that file.

Each method has the name, parameters and meaning of its ``QueueAdmin`` twin
(tests/engine/test_sharded_parity.py holds them to it) and asks the shards: one that acts
on a job or a workflow by id asks each shard in turn until one knows it, as no id tells
its shard (a job goes to the shard of its group or key, when it has one); a schedule
lives in the shard its name picks (``shard_index``); listings and counts are the shards'
merged, in the order of the plain queue's.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import fields
from types import EllipsisType
from typing import Any

from durq._sync.queue import Queue
from durq.errors import InvalidArgument
from durq.keys import shard_index
from durq.limits import FlowInfo, Rate, merge_flow, shard_settings
from durq.models import (
    CancelResult,
    CancelStatus,
    GroupInfo,
    JobInfo,
    Parked,
    Progress,
    QueueStats,
    ScheduleInfo,
    StoredStep,
    WorkflowInfo,
)
from durq.protocol.args import job_ids, positive_int
from durq.protocol.calls import MAX_BATCH

__all__ = ["ShardedQueueAdmin"]


class ShardedQueueAdmin:
    """Job control and inspection of a sharded queue: the part of ``ShardedQueue``
    that acts on the queue as a whole or on jobs by id."""

    # set by ShardedQueue
    name: str
    shards: list[Queue]
    shard_count: int

    # -- job control --------------------------------------------------------------

    def cancel(self, ids: str | Sequence[str]) -> list[CancelResult]:
        """Cancel jobs, whichever shard holds them (see ``Queue.cancel``): each
        shard is asked for the ids the shards before it did not know."""
        wanted = job_ids(ids)
        found: dict[str, CancelResult] = {}
        for shard in self.shards:
            left = [i for i in dict.fromkeys(wanted) if i not in found]
            if not left:
                break
            for result in shard.cancel(left):
                if result.status is not CancelStatus.NOT_FOUND:
                    found[result.id] = result
        return [found.get(i) or CancelResult(i, CancelStatus.NOT_FOUND) for i in wanted]

    def read_progress(self, job_id: str) -> Progress | None:
        """The last progress stored for ``job_id``, from whichever shard holds it."""
        for shard in self.shards:
            progress = shard.read_progress(job_id)
            if progress is not None:
                return progress
        return None

    # -- inspecting and repairing ------------------------------------------------

    def stats(self) -> QueueStats:
        """The shards' sizes and counters added up (``server_time``: the latest)."""
        return self._added_up([shard.stats() for shard in self.shards])

    def outbox_stats(self) -> QueueStats:
        """The shards' workflow outboxes, added up (see ``Queue.outbox_stats``)."""
        return self._added_up([shard.outbox_stats() for shard in self.shards])

    def _added_up(self, each: list[QueueStats]) -> QueueStats:
        sums = {
            f.name: sum(getattr(s, f.name) for s in each)
            for f in fields(QueueStats)
            if f.name not in ("name", "server_time")
        }
        return QueueStats(name=self.name, server_time=max(s.server_time for s in each), **sums)

    def job(self, job_id: str) -> JobInfo | None:
        """Everything stored about one job, from whichever shard holds it."""
        for shard in self.shards:
            info = shard.job(job_id)
            if info is not None:
                return info
        return None

    def dead_letters(self, limit: int = 100, offset: int = 0) -> list[JobInfo]:
        """Dead letters of every shard, newest first."""
        return (self.dead_letters_page(offset, limit))[1]

    def replay(self, ids: str | Sequence[str]) -> int:
        """Replay dead letters, whichever shard holds them; returns how many."""
        return sum([shard.replay(ids) for shard in self.shards])

    def replay_all(self) -> int:
        """Replay every dead letter of every shard; returns how many."""
        return sum([shard.replay_all() for shard in self.shards])

    def purge(self, ids: str | Sequence[str]) -> int:
        """Delete dead letters for good, whichever shard holds them."""
        return sum([shard.purge(ids) for shard in self.shards])

    def purge_all(self) -> int:
        """Delete every dead letter of every shard."""
        return sum([shard.purge_all() for shard in self.shards])

    def check(self) -> list[str]:
        """The keys of any shard that hold another Redis type than durq expects."""
        return [problem for shard in self.shards for problem in shard.check()]

    def groups(self, limit: int = 20, names: Sequence[str] = ()) -> list[GroupInfo]:
        """The largest groups by ready jobs (a group lives in one shard)."""
        return (self.groups_page(limit, names))[1]

    def configure(
        self,
        *,
        group_limit: int | None = None,
        dedup_window: float | None = None,
        dead_cap: int | None = None,
        limits: Mapping[str, int | None] | None = None,
        weights: Mapping[str, int | None] | None = None,
        rate: Rate | EllipsisType | None = ...,
        group_rate: Rate | EllipsisType | None = ...,
        group_rates: Mapping[str, Rate | None] | None = None,
        max_active: int | EllipsisType | None = ...,
    ) -> None:
        """Change shared settings on every shard (see ``Queue.configure``). The
        queue's ``rate`` and ``max_active`` are shared out among the shards, so they hold
        for the whole queue (docs/flow-control.md, "Sharded queues")."""
        settings: dict[str, Any] = {
            "group_limit": group_limit, "dedup_window": dedup_window, "dead_cap": dead_cap,
            "limits": limits, "weights": weights, "rate": rate, "group_rate": group_rate,
            "group_rates": group_rates, "max_active": max_active,
        }  # fmt: skip
        count = len(self.shards)
        shared = [shard_settings(settings, count, i) for i in range(count)]  # checked first
        for shard, own in zip(self.shards, shared, strict=True):
            shard.configure(**own)

    def limits(self, limit: int = 20) -> FlowInfo:
        """Flow control at a glance, the shards' states added up."""
        return merge_flow(self.name, [shard.limits(limit) for shard in self.shards])

    # -- for admin tools: pages with totals, workflows, schedules ---------------------

    def groups_page(
        self, limit: int = 20, names: Sequence[str] = ()
    ) -> tuple[int, list[GroupInfo]]:
        """How many groups have ready jobs in all shards, and the ``limit`` largest (or
        those named)."""
        total, found = 0, []
        for shard in self.shards:
            count, page = shard.groups_page(limit, names)
            total += count
            found += page
        found.sort(key=lambda g: g.ready, reverse=True)
        return total, found if names else found[:limit]

    def dead_letters_page(
        self, offset: int = 0, limit: int = 100
    ) -> tuple[int, list[JobInfo]]:
        """How many dead letters the shards hold, and one page of them, newest first
        (``limit``: MAX_BATCH at most): each shard's newest ``offset + limit``, merged."""
        if not isinstance(offset, int) or offset < 0:  # as the plain queue checks them
            raise InvalidArgument("offset must be an int >= 0")
        limit = min(positive_int("limit", limit), MAX_BATCH)
        total, heads = self._heads("dead_letters_page", offset + limit)
        newest = heapq.merge(*heads, key=lambda info: -(info.died_at or 0))
        return total, list(newest)[offset : offset + limit]

    def _heads(self, page: str, n: int) -> tuple[int, list[list[Any]]]:
        """The total of every shard's listing ``page`` (``dead_letters_page`` or
        ``schedules_page``: ``(offset, limit) -> (total, items)``), and the first ``n``
        items of each, read in pages of MAX_BATCH."""
        total, heads = 0, []
        for shard in self.shards:
            read = getattr(shard, page)
            count, items = read(0, min(n, MAX_BATCH))
            while len(items) < min(n, count):
                more = (read(len(items), min(n - len(items), MAX_BATCH)))[1]
                if not more:  # the shard's listing shrank meanwhile
                    break
                items += more
            total += count
            heads.append(items)
        return total, heads

    def workflow(self, workflow_id: str) -> WorkflowInfo | None:
        """Workflow ``workflow_id`` with its steps, from the shard that is its home
        (None: unknown to every shard, or its summary expired)."""
        for shard in self.shards:
            info = shard.workflow(workflow_id)
            if info is not None:
                return info
        return None

    def has_workflow(self, workflow_id: str) -> bool:
        """True when a shard of the queue is the home of workflow ``workflow_id``."""
        for shard in self.shards:
            if shard.has_workflow(workflow_id):
                return True
        return False

    def cancel_workflow(self, workflow_id: str) -> tuple[CancelStatus, str | None]:
        """Cancel workflow ``workflow_id`` in the shard that is its home (see
        ``Queue.cancel_workflow``); (NOT_FOUND, None) when no shard knows it."""
        for shard in self.shards:
            status, state = shard.cancel_workflow(workflow_id)
            if status is not CancelStatus.NOT_FOUND:
                return status, state
        return CancelStatus.NOT_FOUND, None

    def running_workflows(self, limit: int = 100) -> list[tuple[str, float]]:
        """The running workflows whose home is a shard of the queue, oldest first: (id,
        started at)."""
        each = [shard.running_workflows(limit) for shard in self.shards]
        return list(heapq.merge(*each, key=lambda found: found[1]))[:limit]

    def workflow_counters(self) -> dict[str, int]:
        """The shards' workflow counters, added up (see ``Queue.workflow_counters``)."""
        total: dict[str, int] = {}
        for shard in self.shards:
            for name, value in (shard.workflow_counters()).items():
                total[name] = total.get(name, 0) + value
        return total

    def schedules(self) -> list[ScheduleInfo]:
        """Every schedule of the queue (each lives in one shard), in name order."""
        each = [shard.schedules() for shard in self.shards]
        return list(heapq.merge(*each, key=lambda info: info.name))

    def schedules_page(
        self, offset: int = 0, limit: int = 100
    ) -> tuple[int, list[ScheduleInfo]]:
        """How many schedules the shards hold, and a page of them (1,000 at most) in name
        order: each shard's first ``offset + limit``, merged."""
        offset, limit = max(offset, 0), max(min(limit, MAX_BATCH), 1)  # as the plain queue
        total, heads = self._heads("schedules_page", offset + limit)
        merged = heapq.merge(*heads, key=lambda info: info.name)
        return total, list(merged)[offset : offset + limit]

    def _schedule_shard(self, name: str) -> Queue:
        """The shard that holds schedule ``name`` (a schedule is pinned by its name)."""
        return self.shards[shard_index(name, self.shard_count)]

    def schedule(self, name: str) -> ScheduleInfo | None:
        """Schedule ``name`` as stored in its shard, or None."""
        return self._schedule_shard(name).schedule(name)

    def control_schedule(self, action: str, name: str) -> Any:
        """Apply ``action`` to schedule ``name`` in its shard (see
        ``Queue.control_schedule``)."""
        return self._schedule_shard(name).control_schedule(action, name)

    def steps(self, job_id: str) -> list[StoredStep]:
        """What job ``job_id`` stored (durable steps), from whichever shard holds it."""
        for shard in self.shards:
            found = shard.steps(job_id)
            if found:
                return found
        return []

    def parked(self) -> Parked:
        """The shards' parked jobs (durable sleeps and waits), added up."""
        each = [shard.parked() for shard in self.shards]
        return Parked(sum(p.asleep for p in each), sum(p.waiting for p in each))
