"""durq: a reliable and fast task queue for Python on Redis.

Queues (``Queue`` for blocking code, ``AsyncQueue`` for asyncio) hand out jobs under
leases, fence late completions, retry with backoff, dead-letter with reasons, and serve
groups of jobs in turn. See README.md and docs/design.md.
"""

import warnings

from durq._async.namespace import AsyncNamespace
from durq._async.queue import AsyncQueue
from durq._async.sharded import AsyncShardedQueue
from durq._async.topic import AsyncTopic
from durq._sync.namespace import Namespace
from durq._sync.queue import Queue
from durq._sync.sharded import ShardedQueue
from durq._sync.topic import Topic
from durq._version import __version__
from durq.app.app import App
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
    CorruptQueue,
    DurqError,
    Expired,
    Fail,
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
    StepError,
    TimeLimitExceeded,
    WaitTimeout,
    WorkflowFailed,
)
from durq.limits import FlowInfo, ParkedGroup, Rate
from durq.models import (
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
    StoredStep,
    Trust,
)
from durq.redaction import Redact

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
    "CorruptQueue",
    "DurqError",
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
        return Outcome
    raise AttributeError(f"module 'durq' has no attribute {name!r}")
