"""The holding area: jobs a worker fetched but cannot run (their task is not in its app,
or not at the version the job carries) wait there for a worker that can, instead of
being dead-lettered at once (``lua/lib/holding/held.lua``; docs/deployment.md).

A capability names a task at one version: ``"<task>"`` for version 1 (every job of a
task that declares no version), ``"<task>@<version>"`` above. A worker has the
capabilities of every task it runs, at each version it can run (its own, and every
older one its migrations lead up from: ``durq.app.task``).
"""

from __future__ import annotations

from collections.abc import Sequence

from durq.keys import QueueKeys
from durq.protocol.args import delay_ms
from durq.protocol.calls import Op, batched, script_call, text
from durq.protocol.lifecycle import Leased
from durq.protocol.status import Status

__all__ = ["MAX_UNHOLD", "capability", "hold", "publish", "seen", "unhold"]

#: jobs one unhold call brings back at most (lua/ops/unhold.lua MAX_JOBS)
MAX_UNHOLD = 100


def capability(task: str, version: int) -> str:
    """The capability of running ``task`` at ``version``."""
    return task if version == 1 else f"{task}@{version}"


def hold(
    keys: QueueKeys, items: Sequence[tuple[Leased, str]], grace: float, worker: str
) -> Op[list[Status]]:
    """Put fetched jobs in the holding area, each with the capability it waits for,
    without counting an attempt (fenced by the lease token); ``grace``: the queue's
    ``unknown_task_grace`` in seconds (0: dead-letter them at once, reason
    ``unknown_task``)."""
    rows = [(job.id, job.token, cap) for job, cap in items]
    replies = yield from batched("hold", keys, (delay_ms(grace, "grace"), worker), rows)
    return [Status(int(s)) for reply in replies for s in reply]


def publish(
    keys: QueueKeys, caps: Sequence[str], grace: float, ahead: float = 0.0
) -> Op[tuple[int, list[str]]]:
    """Say that a worker of the queue has ``caps`` (with its heartbeat), and will say it
    again within ``ahead`` seconds; dead-letter jobs held for a capability no worker has
    had for ``grace`` seconds past the time its last saying covered. Returns how many
    were dead-lettered, and which of ``caps`` have held jobs (the worker brings them
    back: ``unhold``)."""
    reply = yield script_call("caps", keys, _args(caps, grace, ahead))
    return int(reply[0]), [text(cap) for cap in reply[1:]]


def seen(keys: QueueKeys, caps: Sequence[str], grace: float, ahead: float = 0.0) -> Op[None]:
    """Say again that a worker of the queue has ``caps``, as ``publish`` does, without
    what only held jobs need (which of them have some, the sweep): for a worker whose
    look found none held."""
    yield script_call("caps_seen", keys, _args(caps, grace, ahead))


def _args(caps: Sequence[str], grace: float, ahead: float) -> tuple[int | str, ...]:
    """The arguments of caps.lua and caps_seen.lua."""
    return (max(delay_ms(grace, "grace"), 1), delay_ms(max(ahead, 0.0), "ahead"), *caps)


def unhold(keys: QueueKeys, caps: Sequence[str], n: int) -> Op[tuple[int, list[str]]]:
    """Bring up to ``n`` jobs held for ``caps`` back to the head of their groups (the
    caller fetches in the same round trip). Returns how many came back, and which of
    ``caps`` still hold jobs."""
    reply = yield script_call("unhold", keys, (min(max(n, 1), MAX_UNHOLD), *caps))
    return int(reply[0]), [text(cap) for cap in reply[1:]]
