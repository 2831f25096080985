"""Batch tasks: one call of the task receives many jobs, its items (``durq.Batch``).

    @app.task(queue="events", batch=durq.Batch(max_size=100, max_wait=0.5))
    def store(items: list[durq.Item]) -> None:          # or async def
        db.insert_many([item.args[0] for item in items])

    store.enqueue({"user": 7, "event": "login"})          # enqueues ONE item

An item is an ordinary job of the task's queue (its own id, attempts, group, key,
delay, priority, expiry); the worker hands the function a list of them, leased
together. How a batch forms, and how each item ends, is in docs/batches.md.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from durq.errors import InvalidArgument, Retry
from durq.protocol.batches import check_batch

if TYPE_CHECKING:
    from durq.models import Job

__all__ = ["ANY_ITEM", "MAX_CONCURRENCY", "Batch", "Item", "check_batch_function"]

#: the most batches of one task a worker process runs at once per queue (or shard):
#: each holds up to max_size leased items, so more would be a prefetch by another name
MAX_CONCURRENCY = 64

#: the item signature of a batch task that declares none: any JSON arguments
ANY_ITEM = inspect.Signature(
    [
        inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL),
        inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD),
    ]
)


@dataclass(frozen=True)
class Batch:
    """Make a task a batch task: ``@app.task(queue=..., batch=durq.Batch(...))``.

    Args:
        max_size: the most items a call receives (1..1000, default 100): a batch starts
            as soon as it has that many.
        max_wait: seconds a partial batch waits for more from its first item (0..60,
            default 1): it then starts with what it has.
        by_group: every item of a batch from one group (one bulk call per tenant), the
            groups served in turn.
        item: what one item's arguments must fit: a function (its signature) or an
            ``inspect.Signature``; checked at enqueue. Default: any JSON arguments.
        concurrency: the batches of this task a worker process runs at once per queue
            (or shard), 1..MAX_CONCURRENCY (default 1): each formed, run and settled on
            its own, no item leased beyond them.
    """

    max_size: int = 100
    max_wait: float = 1.0
    by_group: bool = False
    item: Callable[..., Any] | inspect.Signature | None = None
    concurrency: int = 1

    def __post_init__(self) -> None:
        check_batch(self.max_size, self.max_wait, 1.0)
        if not isinstance(self.by_group, bool):
            raise InvalidArgument(f"by_group must be a bool, got {self.by_group!r}")
        n = self.concurrency
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_CONCURRENCY:
            raise InvalidArgument(
                f"concurrency must be an int in 1..{MAX_CONCURRENCY} (batches in flight per "
                f"worker process), got {n!r}"
            )
        if not (
            self.item is None or isinstance(self.item, inspect.Signature) or callable(self.item)
        ):
            raise InvalidArgument(
                f"item must be a function or an inspect.Signature, got {type(self.item).__name__}"
            )

    def item_signature(self) -> inspect.Signature:
        """The signature an item's arguments are checked against at enqueue."""
        if self.item is None:
            return ANY_ITEM
        if isinstance(self.item, inspect.Signature):
            return self.item
        return inspect.signature(self.item)


def check_batch_function(fn: Callable[..., Any], name: str) -> None:
    """A batch task's function takes exactly one parameter, the list of items: refused
    at declaration (InvalidArgument), not in a worker."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"batch task {name}: its signature cannot be read: {exc}") from None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    required = [p for p in params if p.default is inspect.Parameter.empty]
    if len(params) != 1 or params[0].kind not in positional or len(required) != 1:
        shown = ", ".join(str(p) for p in params)
        raise InvalidArgument(
            f"batch task {name}({shown}) must take exactly one parameter, the list of "
            "items (durq.Item): def " + name + "(items: list[durq.Item]) -> None"
        )


class Item:
    """One job of a batch, as the batch task's function receives it.

    ``id``, ``args``, ``kwargs`` (the call's arguments, as enqueued), ``attempt`` (from
    1), ``max_attempts``, ``group`` (None: the default group), ``key``, ``enqueued_at``
    (server time, seconds) and ``job`` (the leased job itself).

    By default an item ends as its batch does: completed when the function returns,
    failed when it raises. ``fail`` and ``retry`` settle one item its own way; the rest
    of the batch is unaffected.
    """

    # the job's own fields are read from it when asked (a worker makes an Item per
    # item of every batch, and most functions read only ``args``)
    __slots__ = ("args", "job", "kwargs", "outcome")

    def __init__(self, job: Job, args: list[Any], kwargs: dict[str, Any]) -> None:
        self.job = job
        self.args = tuple(args)
        self.kwargs = kwargs
        #: what the function said about this item (``fail``, ``retry``), or None
        self.outcome: BaseException | None = None

    @property
    def id(self) -> str:
        """The item's job id."""
        return self.job.id

    @property
    def attempt(self) -> int:
        """This attempt's number, from 1."""
        return self.job.attempt

    @property
    def max_attempts(self) -> int:
        """The attempts allowed before the item is dead-lettered."""
        return self.job.max_attempts

    @property
    def group(self) -> str | None:
        """Its group (None: the default group)."""
        return self.job.group

    @property
    def key(self) -> str | None:
        """Its key (deduplication), if it was given one."""
        return self.job.key

    @property
    def enqueued_at(self) -> float:
        """When it was enqueued (server time, seconds)."""
        return self.job.enqueued_at

    def __repr__(self) -> str:
        return f"<Item {self.id} attempt={self.attempt}/{self.max_attempts}>"

    def fail(self, exc: BaseException | str) -> None:
        """This item failed with ``exc``, as if a task had raised it: retried after its
        backoff (or dead-lettered once its attempts are spent); ``durq.Fail``
        dead-letters it now, ``durq.Retry`` retries it after its delay, and
        ``durq.RateLimited`` gives it back without counting the attempt, pausing its
        scope. A string is the message of a plain failure."""
        if isinstance(exc, str):
            exc = RuntimeError(exc)
        if not isinstance(exc, BaseException):
            raise InvalidArgument(f"fail() takes an exception or a message, not {exc!r}")
        self.outcome = exc

    def retry(self, delay: float | None = None, reason: str = "retry requested") -> None:
        """Retry this item after ``delay`` seconds (default: the task's backoff); the
        attempt counts."""
        self.outcome = Retry(reason, delay=delay)
