"""From task calls to what each queue is handed: the middle of a job's one way down.

``Task.enqueue``, ``Task.enqueue_many``, ``task.options(...)`` and ``App.enqueue_calls``
all end in ``App._enqueue`` with a list of task calls (``durq.app.task.TaskCall``), which
:func:`batches` turns into one :class:`Batch` per queue: each call's arguments checked
and its payload encoded once (``Task.encode``), before anything is sent, so that a bad
call enqueues nothing. The App then hands each batch to its queue in one round trip and
makes the handles:

- calls without per-job options, of one ``max_attempts``, to a plain queue: the encoded
  payloads under fresh ids (``Queue.enqueue_encoded``, no per-message options to read);
- any other batch: ``Message`` objects whose payloads are the encoded ones
  (``codec.Encoded``, stored as they are) with their options (``Queue.enqueue_many``, or
  a sharded queue's, which routes each to its shard).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from durq.app import tracing
from durq.app.task import NO_OPTIONS, TaskCall
from durq.codec import Encoded, PayloadCodec
from durq.errors import InvalidArgument
from durq.models import Message
from durq.protocol.args import new_ids

__all__ = ["Batch", "batches"]


class Batch:
    """The calls of one queue, checked and encoded, with their places in the caller's
    list (``at``). A plain class with slots: ``Task.enqueue`` makes one per call."""

    __slots__ = ("at", "calls", "encoded", "max_attempts", "plain", "queue", "task")

    def __init__(
        self,
        queue: str,
        at: Sequence[int],
        calls: Sequence[TaskCall],
        encoded: list[tuple[int, bytes]],
    ) -> None:
        """The batch of ``queue``, from calls of one task (at ``at``, encoded)."""
        self.queue = queue
        self.at = at
        self.calls = calls
        self.encoded = encoded
        #: the task of every call (None once calls of several tasks are merged in)
        self.task: Any = calls[0][0]
        #: the first call's task's ``max_attempts`` (None: the queue's)
        self.max_attempts: int | None = calls[0][0].config.max_attempts
        #: no call has per-job options and all share ``max_attempts``
        self.plain = calls[0][3] is NO_OPTIONS

    def jobs(self) -> list[tuple[str, int, bytes]]:
        """A plain batch as ``(id, codec, data)`` jobs under fresh ids."""
        ids = new_ids(len(self.encoded))
        if len(ids) == 1:  # Task.enqueue: no zip, no comprehension
            return [(ids[0], *self.encoded[0])]
        return [(i, c, d) for i, (c, d) in zip(ids, self.encoded, strict=True)]

    def messages(self) -> list[Message]:
        """The batch as messages: the encoded payloads, with each call's options."""
        out: list[Message] = []
        for (task, _args, _kwargs, o), (codec, data) in zip(self.calls, self.encoded, strict=True):
            out.append(
                Message(
                    Encoded(codec, data), o.id, o.due, o.priority, task.config.max_attempts,
                    o.group, o.key, o.replace, o.expires, o.ttl, o.debounce, o.max_wait,
                    o.keep_last,
                )
            )  # fmt: skip
        return out


def batches(owner: Any, calls: Sequence[TaskCall], codec: PayloadCodec) -> list[Batch]:
    """``calls`` (of tasks of ``owner``, an App) by queue, each checked and encoded with
    ``codec``: InvalidArgument, NotSerializable or PayloadTooLarge before any is sent."""
    if not calls:
        return []
    traced = tracing.enabled()  # looked up once for the whole list
    task, options = calls[0][0], calls[0][3]
    for call in calls:
        if call[0] is not task or call[3] is not options:
            break
    else:  # one task, one set of options: Task.enqueue, and enqueue_many's usual form
        return [_batch(owner, range(len(calls)), calls, codec, traced)]
    by_run: dict[tuple[int, int], tuple[list[int], list[TaskCall]]] = {}
    for i, call in enumerate(calls):  # the calls of each task and set of options
        at, run = by_run.setdefault((id(call[0]), id(call[3])), ([], []))
        at.append(i)
        run.append(call)
    by_queue: dict[str, Batch] = {}
    for at, run in by_run.values():
        batch = _batch(owner, at, run, codec, traced)
        found = by_queue.get(batch.queue)
        if found is None:
            by_queue[batch.queue] = batch
            continue
        found.plain = found.plain and batch.plain and batch.max_attempts == found.max_attempts
        found.task = found.task if found.task is batch.task else None
        found.at = [*found.at, *batch.at]
        found.calls = [*found.calls, *batch.calls]
        found.encoded += batch.encoded
    for batch in by_queue.values():  # a queue gets its calls in the caller's order
        order = sorted(range(len(batch.at)), key=batch.at.__getitem__)
        batch.at = [batch.at[k] for k in order]
        batch.calls = [batch.calls[k] for k in order]
        batch.encoded = [batch.encoded[k] for k in order]
    return list(by_queue.values())


def _batch(
    owner: Any, at: Sequence[int], calls: Sequence[TaskCall], codec: PayloadCodec, traced: bool
) -> Batch:
    """The batch of calls of one task with one set of options."""
    task, options = calls[0][0], calls[0][3]
    if task.app is not owner:
        raise InvalidArgument(f"task {task.name} belongs to another App")
    encoded = task.encode(calls, options, codec, traced)
    return Batch(options.queue or task.config.queue, at, calls, encoded)
