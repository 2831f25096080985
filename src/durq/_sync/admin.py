"""QueueAdmin: job control and inspection of a durq queue, used from blocking code
(a part of ``Queue``).

GENERATED from durq/_async/admin.py by scripts/unasync.py: edit that file.
The methods here act on the queue as a whole or on jobs by id, never as a lease holder:
cancels and progress reads, stats, dead letters, groups, and the settings shared by every
client (``configure``, ``limits``); and, for admin tools (the ``durq`` command, the
dashboard), pages of groups and dead letters with their totals, the workflows whose home
is the queue and the schedules it holds. All logic lives in ``durq.protocol``
(``control``, ``admin``, ``limits``, ``workflows``, ``schedules``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import EllipsisType
from typing import Any

from durq._sync.driver import Driver
from durq.keys import QueueKeys
from durq.limits import FlowInfo, Rate
from durq.models import (
    CancelResult,
    CancelStatus,
    GroupInfo,
    JobInfo,
    Progress,
    QueueStats,
    ScheduleInfo,
    WorkflowInfo,
)
from durq.protocol import admin, control, scan
from durq.protocol import limits as limit_ops
from durq.protocol import schedules as schedule_ops
from durq.protocol import workflows as workflow_ops
from durq.protocol.args import delay_ms
from durq.protocol.status import Status

__all__ = ["QueueAdmin"]

# what a workflow's cancel did, by the script's status
_WORKFLOW_CANCEL = {
    Status.CANCELLED: CancelStatus.CANCELLED,
    Status.FINISHED: CancelStatus.FINISHED,
}


class QueueAdmin:
    """Job control and inspection of a queue: the part of ``Queue`` that acts on the
    queue as a whole or on jobs by id."""

    # set by Queue
    keys: QueueKeys
    result_ttl: float
    _driver: Driver

    # -- job control --------------------------------------------------------------

    def cancel(self, ids: str | Sequence[str]) -> list[CancelResult]:
        """Cancel jobs; a CancelResult per id, in order. A job that has not started, or
        waits for its next attempt, ends cancelled at once and never runs (CANCELLED);
        a running job is flagged and its worker stops it within a third of its lease,
        after which it ends cancelled, never retried (CANCELLING). A job that had ended
        is left as it is (FINISHED); an unknown id gets NOT_FOUND. Either way a waiter
        of the job's result gets ``durq.Cancelled``."""
        return self._driver.run(control.cancel(self.keys, ids, self.result_ttl))

    def read_progress(self, job_id: str) -> Progress | None:
        """The last progress stored for ``job_id`` (None: none, or the job is gone)."""
        return self._driver.run(control.read_progress(self.keys, job_id))

    # -- inspecting and repairing ------------------------------------------------

    def stats(self) -> QueueStats:
        """Sizes (pending, delayed, active, dead) and lifetime counters."""
        return self._driver.run(admin.stats(self.keys))

    def outbox_stats(self) -> QueueStats:
        """Sizes and counters of the queue's workflow outbox: entries for workflows and
        steps in other Redis Cluster slots that its workers have not delivered yet
        (pending: waiting, delayed: retrying, active: being delivered; see
        docs/workflows.md, "Across queues")."""
        return self._driver.run(admin.outbox_stats(self.keys))

    def job(self, job_id: str) -> JobInfo | None:
        """Everything stored about one job, or None if the queue has no trace of it."""
        return self._driver.run(admin.job(self.keys, job_id))

    def dead_letters(self, limit: int = 100, offset: int = 0) -> list[JobInfo]:
        """Dead letters, newest first, with their reasons and attempts."""
        return (self._driver.run(admin.dead_letters(self.keys, offset, limit)))[1]

    def replay(self, ids: str | Sequence[str]) -> int:
        """Put dead letters back in the queue with fresh attempts; returns how many."""
        return self._driver.run(admin.replay(self.keys, ids))

    def replay_all(self) -> int:
        """Replay every dead letter; returns how many."""
        return self._driver.run(admin.replay(self.keys, None))

    def purge(self, ids: str | Sequence[str]) -> int:
        """Delete dead letters for good; returns how many."""
        return self._driver.run(admin.purge(self.keys, ids))

    def purge_all(self) -> int:
        """Delete every dead letter; returns how many."""
        return self._driver.run(admin.purge(self.keys, None))

    def check(self) -> list[str]:
        """The queue's keys that hold another Redis type than durq expects (written by
        something else); each makes calls fail with CorruptQueue until it is removed."""
        found = self._driver.run(admin.check(self.keys))
        return found + self._driver.run(limit_ops.check(self.keys))

    def scan_jobs(self, cursor: int = 0, count: int = 500) -> tuple[int, list[JobInfo]]:
        """One page of the queue's job records, in no order (``durq deploy check``):
        the cursor of the next page (0: the scan is over) and the jobs, their records
        only (no reason, no scores). A job present throughout the scan is seen at least
        once."""
        return self._driver.run(scan.scan_jobs(self.keys, cursor, count))

    def groups(self, limit: int = 20, names: Sequence[str] = ()) -> list[GroupInfo]:
        """The largest groups by ready jobs, or the groups named."""
        return (self._driver.run(admin.groups(self.keys, limit, names)))[1]

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
        """Change settings shared by every client of this queue.

        Args:
            group_limit: default concurrency of each named group (0: unlimited).
            dedup_window: seconds after its enqueue during which a finished job's id
                stays taken (default 60).
            dead_cap: dead letters kept at most (0: unlimited); evictions are counted.
            limits: per-group concurrency limits (None removes one).
            weights: per-group jobs served per turn, at least 1 (None removes one).
            rate: at most this many job starts for the whole queue (a ``durq.Rate``;
                None removes it). Flow control: see docs/flow-control.md.
            group_rate: the rate of each named group that has none of its own (None
                removes it).
            group_rates: rates of single groups, overriding ``group_rate`` (None
                removes one).
            max_active: at most this many jobs of the queue leased at once, across all
                workers (None removes the cap).
        """
        queue: dict[str, int | None] = {}
        if group_limit is not None:
            queue["group_limit"] = group_limit
        if dedup_window is not None:
            queue["dedup_window"] = delay_ms(dedup_window, "dedup_window")
        if dead_cap is not None:
            queue["dead_cap"] = dead_cap
        settings: dict[str, limit_ops.FlowSetting] = {}
        if not isinstance(rate, EllipsisType):
            settings["rate"] = rate
        if not isinstance(group_rate, EllipsisType):
            settings["group_rate"] = group_rate
        if not isinstance(max_active, EllipsisType):
            settings["max_active"] = max_active
        flow_op = limit_ops.configure(self.keys, settings, group_rates)  # checked before sending
        op = admin.configure(self.keys, queue=queue, limits=limits, weights=weights)
        self._driver.run(op)
        self._driver.run(flow_op)

    def limits(self, limit: int = 20) -> FlowInfo:
        """Flow control at a glance: the limits, the current rate, pauses, and the
        groups parked by their rate (the ``limit`` that start again first)."""
        return self._driver.run(limit_ops.flow_info(self.keys, limit))

    # -- for admin tools: pages with totals, workflows, schedules ---------------------

    def groups_page(
        self, limit: int = 20, names: Sequence[str] = ()
    ) -> tuple[int, list[GroupInfo]]:
        """How many groups have ready jobs, and the ``limit`` largest (or those named)."""
        return self._driver.run(admin.groups(self.keys, limit, names))

    def dead_letters_page(
        self, offset: int = 0, limit: int = 100
    ) -> tuple[int, list[JobInfo]]:
        """How many dead letters the queue holds, and one page of them, newest first."""
        return self._driver.run(admin.dead_letters(self.keys, offset, limit))

    def workflow(self, workflow_id: str) -> WorkflowInfo | None:
        """Workflow ``workflow_id`` of which this queue is the home, with its steps
        (None: unknown here, or its summary expired)."""
        return self._driver.run(workflow_ops.info(self.keys, workflow_id))

    def has_workflow(self, workflow_id: str) -> bool:
        """True when this queue is the home of workflow ``workflow_id`` (running, or
        ended with its summary kept)."""
        return self._driver.run(workflow_ops.exists(self.keys, workflow_id))

    def cancel_workflow(self, workflow_id: str) -> tuple[CancelStatus, str | None]:
        """Cancel workflow ``workflow_id`` of which this queue is the home (as
        ``WorkflowHandle.cancel``): (CANCELLED, "cancelled"), (FINISHED, the state it
        had ended in: nothing changed) or (NOT_FOUND, None)."""
        status, state = self._driver.run(workflow_ops.cancel(self.keys, workflow_id))
        return _WORKFLOW_CANCEL.get(status, CancelStatus.NOT_FOUND), state

    def running_workflows(self, limit: int = 100) -> list[tuple[str, float]]:
        """The running workflows of which this queue is the home, oldest first: (id,
        started at)."""
        return self._driver.run(workflow_ops.running(self.keys, limit))

    def workflow_counters(self) -> dict[str, int]:
        """Workflows started, completed, failed and cancelled with this queue as their
        home, and their steps cancelled unstarted (``durq_workflows_*`` metrics)."""
        return self._driver.run(workflow_ops.counters(self.keys))

    def schedules(self) -> list[ScheduleInfo]:
        """Every schedule the queue (or shard) holds, in name order, with its state."""
        return self._driver.run(schedule_ops.list_all(self.keys))

    def schedules_page(
        self, offset: int = 0, limit: int = 100
    ) -> tuple[int, list[ScheduleInfo]]:
        """How many schedules the queue holds, and a page of them (1,000 at most)."""
        return self._driver.run(schedule_ops.list_page(self.keys, offset, limit))

    def schedule(self, name: str) -> ScheduleInfo | None:
        """Schedule ``name`` as stored in this queue (or shard), or None."""
        found = self._driver.run(schedule_ops.get(self.keys, [name]))
        return found[0] if found else None

    def control_schedule(self, action: str, name: str) -> Any:
        """Apply ``action`` to schedule ``name`` of this queue (or shard): ``pause`` or
        ``remove`` (returns True), ``resume`` (the next tick's time, False once it has
        ended) or ``trigger`` (the id of the job enqueued). None when the queue holds no
        such schedule."""
        return self._driver.run(schedule_ops.control(self.keys, action, name))
