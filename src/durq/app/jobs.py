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
from dataclasses import dataclass, field
from typing import Any

from durq.app import tracing
from durq.app.task import NO_OPTIONS, TaskCall
from durq.codec import Encoded, PayloadCodec
from durq.errors import InvalidArgument
from durq.models import Message
from durq.protocol.args import new_ids

__all__ = ["Batch", "batches"]


@dataclass
class Batch:
    """The calls of one queue, checked and encoded, with their places in the caller's
    list (``at``)."""

    queue: str
    at: list[int] = field(default_factory=list)
    calls: list[TaskCall] = field(default_factory=list)
    encoded: list[tuple[int, bytes]] = field(default_factory=list)
    #: the first call's task's ``max_attempts`` (None: the queue's)
    max_attempts: int | None = None
    #: no call has per-job options and all share ``max_attempts``
    plain: bool = True

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
                    Encoded(codec, data), o.id, o.delay, o.priority, task.config.max_attempts,
                    o.group, o.key, o.replace, o.expires, o.ttl, o.debounce, o.max_wait,
                    o.keep_last,
                )
            )  # fmt: skip
        return out


def batches(owner: Any, calls: Sequence[TaskCall], codec: PayloadCodec) -> list[Batch]:
    """``calls`` (of tasks of ``owner``, an App) by queue, each checked and encoded with
    ``codec``: InvalidArgument, NotSerializable or PayloadTooLarge before any is sent."""
    by_queue: dict[str, Batch] = {}
    traced = tracing.enabled()  # looked up once for the whole list
    for i, call in enumerate(calls):
        task, args, kwargs, options = call
        if task.app is not owner:
            raise InvalidArgument(f"task {task.name} belongs to another App")
        config = task.config
        name = options.queue or config.queue
        batch = by_queue.get(name)
        if batch is None:
            batch = by_queue[name] = Batch(name, max_attempts=config.max_attempts)
        elif config.max_attempts != batch.max_attempts:
            batch.plain = False
        if options is not NO_OPTIONS:
            batch.plain = False
        batch.at.append(i)
        batch.calls.append(call)
        batch.encoded.append(task.encode(args, kwargs, options, codec, traced))
    return list(by_queue.values())
