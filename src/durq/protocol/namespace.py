"""What lives in a namespace, as IO-free operations: its queues, the shard counts of its
sharded queues, and its live workers (their heartbeats), read and written here only.

The keys are ``NamespaceKeys``'. Each is in a slot of its own, so every request here
names one key, except where ``batch`` says one server holds them all (no Cluster): then
the requests of one step go in one round trip, as a pipeline.

A worker's heartbeat is a hash of JSON values (host, pid, queues, started, concurrency,
jobs in hand, last beat, running totals) that expires unless refreshed; its id stays in
``<ns>:workers`` until a reader that may write (``live_workers(prune=True)``) finds the
hash gone and removes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from durq.errors import InvalidArgument
from durq.keys import NamespaceKeys
from durq.protocol.calls import Command, Op, Pipeline

__all__ = [
    "add_queue",
    "beat_worker",
    "is_queue",
    "live_workers",
    "queue_names",
    "register_queue",
    "register_sharded",
    "remove_worker",
    "shard_counts",
]


def _pairs(raw: Any) -> list[tuple[Any, Any]]:
    """A hash reply as (field, value) pairs: a flat list (RESP2, as the drivers read it
    off the wire) or a dict (a client that parses replies)."""
    if isinstance(raw, Mapping):
        return list(raw.items())
    flat = list(raw)
    return list(zip(flat[::2], flat[1::2], strict=True))


def _text(value: Any) -> str:
    # leniently: a name something else wrote must not break a listing
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _loads(raw: Any) -> Any:
    """A JSON value of a heartbeat, or None when unreadable (a worker of another
    version must not break the listing)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def _raise_errors(replies: Sequence[Any]) -> None:
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply


# -- queues ---------------------------------------------------------------------------


def queue_names(space: NamespaceKeys) -> Op[list[str]]:
    """The namespace's queue names, sorted (a queue is listed once it was used)."""
    members = yield Command(("SMEMBERS", space.queues))
    return sorted(_text(m) for m in members)


def is_queue(space: NamespaceKeys, name: str) -> Op[bool]:
    """True when ``name`` is one of the namespace's queues."""
    found = yield Command(("SISMEMBER", space.queues, name))
    return bool(found)


def add_queue(space: NamespaceKeys, name: str) -> Op[None]:
    """List the queue ``name`` (idempotent)."""
    yield Command(("SADD", space.queues, name))


def register_queue(space: NamespaceKeys, name: str, sharded_class: str) -> Op[None]:
    """List the (unsharded) queue ``name``. Raises InvalidArgument if the queue was
    declared sharded: its jobs belong in its shards, and its own keys would never be
    consumed (the error names ``sharded_class``, the front end's class to use)."""
    shards = yield Command(("HGET", space.shards, name))
    if shards is not None:
        raise InvalidArgument(
            f"queue {name!r} has {int(shards)} shards: use a sharded queue "
            f"({sharded_class}, or App(shards={{{name!r}: {int(shards)}}}))"
        )
    yield from add_queue(space, name)


def register_sharded(space: NamespaceKeys, name: str, shard_count: int) -> Op[None]:
    """Record the sharded queue ``name`` and its shard count, and list it. Raises
    InvalidArgument if Redis knows the queue with another shard count."""
    known = yield Command(("HGET", space.shards, name))
    if known is None:  # HGET and HSET: commands the minimal producer ACL allows
        yield Command(("HSET", space.shards, name, shard_count))
    elif int(known) != shard_count:
        raise InvalidArgument(
            f"queue {name!r} has {int(known)} shards in Redis, not "
            f"{shard_count}: the count cannot change while jobs may be queued"
        )
    yield from add_queue(space, name)


def shard_counts(space: NamespaceKeys) -> Op[dict[str, int]]:
    """Every sharded queue of the namespace and its shard count (a worker or ``durq
    stats`` told to use a queue reads it to find the shards)."""
    raw = yield Command(("HGETALL", space.shards))
    return {_text(k): int(v) for k, v in _pairs(raw)}


# -- workers --------------------------------------------------------------------------


def beat_worker(
    space: NamespaceKeys, worker_id: str, fields: Mapping[str, Any], ttl: float, *, batch: bool
) -> Op[None]:
    """Register worker ``worker_id`` with its heartbeat ``fields`` (each stored as
    JSON), which expire after ``ttl`` seconds unless refreshed."""
    key = space.worker(worker_id)
    values = [v for name, value in fields.items() for v in (name, orjson.dumps(value))]
    add = Command(("SADD", space.workers, worker_id))
    write = (Command(("HSET", key, *values)), Command(("PEXPIRE", key, int(ttl * 1000))))
    if batch:
        _raise_errors((yield Pipeline((add, *write))))
        return
    yield add
    _raise_errors((yield Pipeline(write)))


def remove_worker(space: NamespaceKeys, worker_id: str, *, batch: bool) -> Op[None]:
    """Unregister worker ``worker_id`` (on a clean stop)."""
    drop = Command(("SREM", space.workers, worker_id))
    delete = Command(("DEL", space.worker(worker_id)))
    if batch:
        _raise_errors((yield Pipeline((drop, delete))))
        return
    yield drop
    yield delete


def live_workers(
    space: NamespaceKeys, *, batch: bool, prune: bool = False
) -> Op[dict[str, dict[str, Any]]]:
    """The live workers' heartbeats by worker id, in id order. A listed id whose
    heartbeat expired belongs to a dead worker: it is left out, and removed from the
    list when ``prune`` (a reader that must write nothing, the dashboard, leaves it)."""
    members = yield Command(("SMEMBERS", space.workers))
    ids = sorted(_text(m) for m in members)
    if not ids:
        return {}
    reads = [Command(("HGETALL", space.worker(worker_id))) for worker_id in ids]
    if batch:
        replies = yield Pipeline(tuple(reads))
        _raise_errors(replies)
    else:
        replies = []
        for read in reads:
            replies.append((yield read))
    out: dict[str, dict[str, Any]] = {}
    dead: list[str] = []
    for worker_id, raw in zip(ids, replies, strict=True):
        pairs = _pairs(raw)
        if not pairs:
            dead.append(worker_id)
            continue
        out[worker_id] = {_text(k): _loads(v) for k, v in pairs}
    if prune and dead:
        yield Command(("SREM", space.workers, *dead))
    return out
