"""durq: a reliable and fast task queue for Python on Redis.

Queues (``Queue`` for blocking code, ``AsyncQueue`` for asyncio) hand out jobs under
leases, fence late completions, retry with backoff, dead-letter with reasons, and serve
groups of jobs in turn. See README.md and docs/design.md.
"""

import importlib
import typing
import warnings

from durq._version import __version__

if typing.TYPE_CHECKING:
    from durq._async.namespace import AsyncNamespace
    from durq._async.queue import AsyncQueue
    from durq._async.sharded import AsyncShardedQueue
    from durq._async.topic import AsyncTopic
    from durq._sync.namespace import Namespace
    from durq._sync.queue import Queue
    from durq._sync.sharded import ShardedQueue
    from durq._sync.topic import Topic
    from durq.app.app import App
    from durq.app.batch import Batch, Item
    from durq.app.durable import sleep, sleep_until, step, step_key, wait_for
    from durq.app.handle import JobHandle
    from durq.app.schedule_control import SyncReport
    from durq.app.schedule_spec import Schedule, ScheduleInfo
    from durq.app.task import Call, Task
    from durq.app.workflows import (
        Chain,
        Group,
        StepInfo,
        WorkflowHandle,
        WorkflowInfo,
        chain,
        group,
        step_error,
    )
    from durq.backoff import Backoff, exponential, fixed
    from durq.codec import Codec
    from durq.context import current_job
    from durq.durability import Durability
    from durq.errors import (
        Cancelled,
        ChildDied,
        CorruptQueue,
        DurqError,
        Expired,
        Fail,
        FleetTooOld,
        ForeignLibrary,
        InvalidArgument,
        JobFailed,
        JobNotFound,
        LeaseLost,
        NotDurable,
        NotSerializable,
        PayloadError,
        PayloadRefused,
        PayloadTooLarge,
        RateLimited,
        RedisUnavailable,
        Retry,
        ScriptLoadError,
        ServerNotFound,
        ServerStartError,
        StepError,
        TimeLimitExceeded,
        WaitTimeout,
        WorkflowFailed,
    )
    from durq.limits import FlowInfo, ParkedGroup, Rate
    from durq.models import (
        BatchRecord,
        CancelResult,
        CancelStatus,
        EnqueueResult,
        EnqueueStatus,
        GroupInfo,
        Job,
        JobControl,
        JobInfo,
        JobState,
        LibraryInfo,
        Message,
        Outcome,
        Parked,
        Progress,
        QueueStats,
        Settle,
        StoredStep,
        Trust,
    )
    from durq.redaction import Redact

# Every public name is imported on first use (PEP 562): `import durq` costs a few
# milliseconds, and a producer or a worker loads only the layers it touches (the
# dashboard, the CLI, tracing and the queues' Redis client stay out until needed).
# tests/test_public_api.py checks that this table and __all__ name the same things.
_EXPORTS: dict[str, str] = {
    "AsyncNamespace": "durq._async.namespace",
    "AsyncQueue": "durq._async.queue",
    "AsyncShardedQueue": "durq._async.sharded",
    "AsyncTopic": "durq._async.topic",
    "Namespace": "durq._sync.namespace",
    "Queue": "durq._sync.queue",
    "ShardedQueue": "durq._sync.sharded",
    "Topic": "durq._sync.topic",
    "App": "durq.app.app",
    "Batch": "durq.app.batch",
    "Item": "durq.app.batch",
    "sleep": "durq.app.durable",
    "sleep_until": "durq.app.durable",
    "step": "durq.app.durable",
    "step_key": "durq.app.durable",
    "wait_for": "durq.app.durable",
    "JobHandle": "durq.app.handle",
    "SyncReport": "durq.app.schedule_control",
    "Schedule": "durq.app.schedule_spec",
    "ScheduleInfo": "durq.app.schedule_spec",
    "Call": "durq.app.task",
    "Task": "durq.app.task",
    "Chain": "durq.app.workflows",
    "Group": "durq.app.workflows",
    "StepInfo": "durq.app.workflows",
    "WorkflowHandle": "durq.app.workflows",
    "WorkflowInfo": "durq.app.workflows",
    "chain": "durq.app.workflows",
    "group": "durq.app.workflows",
    "step_error": "durq.app.workflows",
    "Backoff": "durq.backoff",
    "exponential": "durq.backoff",
    "fixed": "durq.backoff",
    "Codec": "durq.codec",
    "current_job": "durq.context",
    "Durability": "durq.durability",
    "Cancelled": "durq.errors",
    "CorruptQueue": "durq.errors",
    "DurqError": "durq.errors",
    "Expired": "durq.errors",
    "Fail": "durq.errors",
    "FleetTooOld": "durq.errors",
    "ForeignLibrary": "durq.errors",
    "InvalidArgument": "durq.errors",
    "JobFailed": "durq.errors",
    "JobNotFound": "durq.errors",
    "LeaseLost": "durq.errors",
    "NotDurable": "durq.errors",
    "NotSerializable": "durq.errors",
    "PayloadError": "durq.errors",
    "PayloadRefused": "durq.errors",
    "PayloadTooLarge": "durq.errors",
    "RateLimited": "durq.errors",
    "RedisUnavailable": "durq.errors",
    "Retry": "durq.errors",
    "ScriptLoadError": "durq.errors",
    "ServerNotFound": "durq.errors",
    "ServerStartError": "durq.errors",
    "StepError": "durq.errors",
    "TimeLimitExceeded": "durq.errors",
    "ChildDied": "durq.errors",
    "WaitTimeout": "durq.errors",
    "WorkflowFailed": "durq.errors",
    "FlowInfo": "durq.limits",
    "ParkedGroup": "durq.limits",
    "Rate": "durq.limits",
    "BatchRecord": "durq.models",
    "CancelResult": "durq.models",
    "CancelStatus": "durq.models",
    "EnqueueResult": "durq.models",
    "EnqueueStatus": "durq.models",
    "GroupInfo": "durq.models",
    "Job": "durq.models",
    "JobControl": "durq.models",
    "JobInfo": "durq.models",
    "JobState": "durq.models",
    "LibraryInfo": "durq.models",
    "Message": "durq.models",
    "Outcome": "durq.models",
    "Parked": "durq.models",
    "Progress": "durq.models",
    "QueueStats": "durq.models",
    "Settle": "durq.models",
    "StoredStep": "durq.models",
    "Trust": "durq.models",
    "Redact": "durq.redaction",
}


__all__ = [
    # tasks
    "App",
    "Call",
    "Cancelled",
    "Expired",
    "Fail",
    "JobFailed",
    "JobHandle",
    "Retry",
    "Task",
    "TimeLimitExceeded",
    "ChildDied",
    "current_job",
    # periodic jobs
    "Schedule",
    "ScheduleInfo",
    "SyncReport",
    # flow control
    "Rate",
    "RateLimited",
    "RedisUnavailable",
    "FlowInfo",
    "ParkedGroup",
    # workflows
    "Chain",
    "Group",
    "StepInfo",
    "WorkflowFailed",
    "WorkflowHandle",
    "WorkflowInfo",
    "chain",
    "group",
    "step_error",
    # batch tasks
    "Batch",
    "Item",
    "Settle",
    "BatchRecord",
    # durable steps
    "step",
    "sleep",
    "sleep_until",
    "wait_for",
    "step_key",
    "StepError",
    "WaitTimeout",
    "StoredStep",
    "Parked",
    # queues
    "AsyncQueue",
    "Queue",
    "AsyncShardedQueue",
    "ShardedQueue",
    "AsyncTopic",
    "Topic",
    "AsyncNamespace",
    "Namespace",
    # data
    "CancelResult",
    "CancelStatus",
    "EnqueueResult",
    "EnqueueStatus",
    "GroupInfo",
    "Job",
    "JobControl",
    "JobInfo",
    "JobState",
    "Message",
    "Progress",
    "QueueStats",
    "Outcome",
    "LibraryInfo",
    "Trust",
    "Codec",
    "Durability",
    # secrets kept out of sight
    "Redact",
    # retry delays
    "Backoff",
    "exponential",
    "fixed",
    # errors
    "ScriptLoadError",
    "ServerNotFound",
    "ServerStartError",
    "CorruptQueue",
    "DurqError",
    "FleetTooOld",
    "ForeignLibrary",
    "InvalidArgument",
    "JobNotFound",
    "LeaseLost",
    "NotDurable",
    "NotSerializable",
    "PayloadError",
    "PayloadRefused",
    "PayloadTooLarge",
    "__version__",
]


def __getattr__(name: str) -> object:
    # durq.Status, the scripts' wire codes, was what the batch methods returned before
    # durq.Outcome; the name stays for a while, as Outcome (same member names)
    if name == "Status":
        warnings.warn(
            "durq.Status is deprecated: the batch methods return durq.Outcome",
            DeprecationWarning,
            stacklevel=2,
        )
        return __getattr__("Outcome")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'durq' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup finds it without this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
