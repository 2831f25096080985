"""The live workers whose data format is older than this tree's (``durq.data_format``),
read from their heartbeats.

A producer reads it before it writes something an older worker would not read: a
workflow is submitted in durq 0.1.0's layout while a worker of 0.1.0 (its heartbeat has
no format) consumes one of its queues (``durq.app.fleet``). One SMEMBERS, then one HMGET
of three small fields per registered worker: O(workers), never O(jobs) (a heartbeat's
list of jobs in hand is not read).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from durq.data_format import DATA_FORMAT
from durq.keys import NamespaceKeys
from durq.protocol.calls import Command, Op, Pipeline

__all__ = ["OldWorker", "old_workers"]

_FIELDS = ("queues", "format", "version")


@dataclass(frozen=True)
class OldWorker:
    """A live worker of an older data format: its id, the queues it consumes, its durq
    version and its format (1 for a heartbeat without one: durq 0.1.0)."""

    id: str
    queues: tuple[str, ...]
    version: str
    format: int


def _load(raw: Any) -> Any:
    if raw is None:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def old_workers(space: NamespaceKeys, *, batch: bool) -> Op[list[OldWorker]]:
    """The live workers of namespace ``space`` whose format is older than
    ``DATA_FORMAT``, in id order (a listed id without a heartbeat is a dead worker's:
    left out)."""
    members = yield Command(("SMEMBERS", space.workers))
    ids = sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members)
    reads = [Command(("HMGET", space.worker(worker_id), *_FIELDS)) for worker_id in ids]
    if not reads:
        return []
    if batch:
        replies = yield Pipeline(tuple(reads))
    else:
        replies = []
        for read in reads:
            replies.append((yield read))
    old: list[OldWorker] = []
    for worker_id, reply in zip(ids, replies, strict=True):
        if isinstance(reply, Exception):
            raise reply
        queues, fmt, version = (_load(v) for v in reply)
        if queues is None:  # expired: a dead worker's id
            continue
        fmt = fmt if isinstance(fmt, int) else 1
        if fmt < DATA_FORMAT:
            names = tuple(str(q) for q in queues) if isinstance(queues, list) else ()
            old.append(OldWorker(worker_id, names, str(version or "0.1.0"), fmt))
    return old
