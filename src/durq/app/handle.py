"""Job handles: what ``enqueue`` returns, to wait for a job's result, read its state and
progress, or cancel it; and the exceptions a wait for a result raises.

A handle knows its job by queue and id; it reads and writes through the App's queues
(``HandleOwner``), so the module needs neither ``App`` nor ``Task``: the task a handle
was enqueued for is typed by what the handle reads of it (``HandledTask``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from durq.errors import Cancelled, Expired, InvalidArgument, JobFailed, JobNotFound
from durq.models import CancelResult, CancelStatus, EnqueueResult, EnqueueStatus, JobInfo, Progress
from durq.payloads import decode_result

if TYPE_CHECKING:
    from durq._async.queue import AsyncQueue
    from durq._sync.queue import Queue

__all__ = ["HandleOwner", "HandledTask", "JobHandle"]

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class HandleOwner(Protocol):
    """What job handles use of the App whose job they stand for: its queues."""

    def queue(self, name: str) -> Queue:
        """The blocking Queue ``name``."""
        ...

    def aqueue(self, name: str, *, client: Any = None) -> AsyncQueue:
        """The AsyncQueue ``name``."""
        ...


class _ResultConfig(Protocol):
    @property
    def result(self) -> bool: ...


class HandledTask(Protocol[R_co]):
    """What a handle reads of the task its job was enqueued for (a ``Task``): its name,
    and whether it stores its result (``config.result``); calling it gives the type of
    the result."""

    def __call__(self, *args: Any, **kwargs: Any) -> R_co:
        """Run the task's function here."""
        ...

    @property
    def name(self) -> str:
        """The task's name."""
        ...

    @property
    def config(self) -> _ResultConfig:
        """How the task runs (``TaskConfig``)."""
        ...


class JobHandle(Generic[R]):
    """What ``enqueue`` returns: the job id, and a way to wait for its result."""

    def __init__(
        self,
        app: HandleOwner,
        queue: str,
        result: EnqueueResult,
        task: HandledTask[R] | None = None,
    ) -> None:
        self.app = app
        self.queue = queue
        self.id = result.id
        self.status: EnqueueStatus = result.status
        self.superseded = result.superseded
        self.task = task  # None when made for a job id by hand

    @classmethod
    def of(
        cls, app: HandleOwner, queue: str, job_id: str, task: HandledTask[R] | None = None
    ) -> JobHandle[R]:
        """The handle of a job known by its queue and id (stored by the caller), as
        ``enqueue`` returned it. A job of a sharded queue is named by its shard
        (``handle.queue``, e.g. ``emails~3``): which shard depends on its group or key."""
        if not isinstance(job_id, str) or not job_id:
            raise InvalidArgument("job_id must be a non-empty str")
        app.queue(queue)  # a sharded queue's name, or a malformed one, is refused here
        return cls(app, queue, EnqueueResult(job_id, EnqueueStatus.EXISTS), task)

    def _check_stored(self) -> None:
        # otherwise the wait would only ever end in a TimeoutError
        if self.task is not None and not self.task.config.result:
            raise InvalidArgument(
                f"task {self.task.name} does not store its result: declare it with "
                "@app.task(result=True) to wait for it"
            )

    def __repr__(self) -> str:
        return f"<JobHandle {self.queue}/{self.id} {self.status.value}>"

    def result(self, timeout: float = 30.0) -> R:
        """Wait up to ``timeout`` seconds (without polling) for the result of a task
        declared with ``result=True``. Raises TimeoutError, or JobFailed if the job was
        dead-lettered; InvalidArgument at once if the task does not store results."""
        self._check_stored()
        raw = self.app.queue(self.queue).wait_result(self.id, timeout)
        value: R = _result_value(self.id, raw, timeout)
        return value

    async def aresult(self, timeout: float = 30.0) -> R:
        """``result`` for asyncio code."""
        self._check_stored()
        raw = await self.app.aqueue(self.queue).wait_result(self.id, timeout)
        value: R = _result_value(self.id, raw, timeout)
        return value

    def info(self) -> JobInfo | None:
        """Everything stored about the job now (None once it is gone)."""
        return self.app.queue(self.queue).job(self.id)

    async def ainfo(self) -> JobInfo | None:
        """``info`` for asyncio code."""
        return await self.app.aqueue(self.queue).job(self.id)

    def cancel(self) -> CancelResult:
        """Cancel the job (see ``Queue.cancel``): it never runs if it has not started,
        and is stopped if it runs; ``result()`` then raises Cancelled. Raises
        JobNotFound if the queue has no trace of it; a job that had ended is left as it
        is (status FINISHED)."""
        return _cancelled(self.app.queue(self.queue).cancel([self.id])[0])

    async def acancel(self) -> CancelResult:
        """``cancel`` for asyncio code."""
        return _cancelled((await self.app.aqueue(self.queue).cancel([self.id]))[0])

    def progress(self) -> Progress | None:
        """The last progress the running job reported (``durq.current_job().progress``):
        None before the first report, and once the job is gone."""
        return self.app.queue(self.queue).read_progress(self.id)

    async def aprogress(self) -> Progress | None:
        """``progress`` for asyncio code."""
        return await self.app.aqueue(self.queue).read_progress(self.id)


def _cancelled(result: CancelResult) -> CancelResult:
    if result.status is CancelStatus.NOT_FOUND:
        raise JobNotFound(result.id)
    return result


def _result_value(job_id: str, raw: bytes | None, timeout: float) -> Any:
    if raw is None:
        raise TimeoutError(f"no result for job {job_id} within {timeout} s")
    ok, value = decode_result(raw)
    if ok:
        return value
    reason = value.get("reason")
    if reason == "cancelled":
        raise Cancelled(job_id, {"message": "the job was cancelled", **value})
    if reason == "expired":
        raise Expired(job_id, {"message": "the job was not started by its expiry time", **value})
    raise JobFailed(job_id, value)
