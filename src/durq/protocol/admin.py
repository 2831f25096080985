"""Inspecting and administering a queue as IO-free operations: sizes and counters (of
the queue and of its workflow outbox), one job, the largest groups, dead letters (list,
replay, purge), shared settings, and a check of the keys' Redis types (``durq doctor``).

Every read is bounded (O(1), or O(log n + page)): nothing walks a whole queue.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import orjson

from durq.errors import InvalidArgument
from durq.keys import OutboxKeys, QueueKeys, check_group, check_job_id
from durq.models import GroupInfo, JobInfo, JobState, QueueStats
from durq.protocol.args import job_ids, natural, positive_int
from durq.protocol.calls import (
    MAX_BATCH,
    Arg,
    Command,
    Op,
    chunk_of,
    script_call,
    send_all,
    text,
)
from durq.protocol.control import FLAG_CANCEL, PARKED, parse_control, parse_progress
from durq.protocol.record import STATE_NAMES, parse_record
from durq.protocol.status import Status

__all__ = [
    "CONF_DEFAULTS",
    "check",
    "configure",
    "dead_letters",
    "groups",
    "job",
    "job_info",
    "outbox_stats",
    "purge",
    "replay",
    "stats",
]

#: queue settings and their defaults, the same as in lua/lib/core/conf.lua
CONF_DEFAULTS: dict[str, int] = {"group_limit": 0, "dedup_window": 60000, "dead_cap": 0}

_STATE = {code: JobState(name) for code, name in STATE_NAMES.items()}


# -- dead letters -------------------------------------------------------------------


def _bulk_dead(name: str, keys: QueueKeys, ids: str | Sequence[str] | None) -> Op[int]:
    done = 0
    size = chunk_of(name)
    if ids is not None:
        wanted = job_ids(ids)
        for i in range(0, len(wanted), size):
            reply = yield script_call(name, keys, ("ids", 0, *wanted[i : i + size]))
            done += sum(1 for s in reply[1::2] if s == Status.OK)
        return done
    while True:  # "all": bounded calls until a short page
        reply = yield script_call(name, keys, ("oldest", size))
        done += sum(1 for s in reply[1::2] if s == Status.OK)
        if len(reply) // 2 < size or not any(s == Status.OK for s in reply[1::2]):
            return done


def replay(keys: QueueKeys, ids: str | Sequence[str] | None) -> Op[int]:
    """Replay the dead letters ``ids`` (all of them when None); returns how many."""
    return (yield from _bulk_dead("replay", keys, ids))


def purge(keys: QueueKeys, ids: str | Sequence[str] | None) -> Op[int]:
    """Delete the dead letters ``ids`` (all of them when None); returns how many."""
    return (yield from _bulk_dead("purge", keys, ids))


# -- inspection ---------------------------------------------------------------------


def _seconds(value: Any) -> float | None:
    return None if value is None else float(value) / 1000


def _reason(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {"reason": "unreadable", "raw": raw.decode("utf-8", "replace")}
    return value if isinstance(value, dict) else {"reason": str(value)}


def job_info(
    job_id: str,
    raw: bytes | None,
    reason: bytes | None,
    *,
    lease_deadline: Any = None,
    due_at: Any = None,
    died_at: Any = None,
    retained_until: Any = None,
    control: bytes | None = None,
    progress: bytes | None = None,
    errors: Sequence[bytes] = (),
) -> JobInfo:
    """Build a JobInfo from a stored record and the scores that surround it (ms), its
    job control data (``protocol.control``) and its last failures (``errors``: the
    error ring of lib/core/attempt_errors.lua as HGETALL returns it)."""
    parked = due_at is not None and float(due_at) >= PARKED  # a keep-last follow-up
    base = JobInfo(
        job_id,
        JobState.COMPLETED,  # a tombstone: finished, record not kept
        lease_deadline=_seconds(lease_deadline),
        due_at=None if parked else _seconds(due_at),
        died_at=_seconds(died_at),
        retained_until=_seconds(retained_until),
        reason=_reason(reason),
        progress=parse_progress(progress),
        errors=_attempt_errors(errors),
        **parse_control(control),
    )
    if raw is None:
        return base
    rec = parse_record(raw)
    if rec is None:
        state = JobState.DEAD if died_at is not None else JobState.PENDING
        return replace(base, state=state, data=raw, corrupt=True)
    return replace(
        base,
        state=_STATE[rec.state],
        priority=rec.priority,
        group=rec.group or None,
        key=rec.key or None,
        attempts=rec.attempts,
        max_attempts=rec.max_attempts,
        deliveries=rec.deliveries,
        failures=rec.failures,
        enqueued_at=rec.enqueued_at_ms / 1000,
        dequeued_at=rec.dequeued_at_ms / 1000 if rec.dequeued_at_ms else None,
        requeued_at=rec.requeued_at_ms / 1000 if rec.requeued_at_ms else None,
        codec_id=rec.codec,
        data=raw[rec.payload_offset :],
        cancel_requested=bool(rec.flags & FLAG_CANCEL),
    )


def _attempt_errors(ring: Sequence[bytes]) -> tuple[dict[str, Any], ...]:
    """A job's error ring (HGETALL: slot, entry, ...) as its failures, oldest first, their
    times in seconds."""
    out = []
    for entry in ring[1::2]:
        fields = _reason(entry) or {}
        if isinstance(fields.get("at"), (int, float)):
            fields["at"] = fields["at"] / 1000
        out.append(fields)
    return tuple(sorted(out, key=lambda e: int(e.get("failure", 0) or 0)))


def job(keys: QueueKeys, job_id: str) -> Op[JobInfo | None]:
    """Everything stored about ``job_id``; None when the queue knows nothing of it."""
    (raw, reason, lease, due, died, retained, _now, control, progress,
     errors) = yield script_call("job", keys, (check_job_id(job_id),))  # fmt: skip
    if raw is None and retained is None:
        return None
    return job_info(job_id, raw, reason, lease_deadline=lease, due_at=due, died_at=died,
                    retained_until=retained, control=control, progress=progress,
                    errors=errors)  # fmt: skip


def dead_letters(
    keys: QueueKeys, offset: int = 0, limit: int = 100
) -> Op[tuple[int, list[JobInfo]]]:
    """A page of dead letters (MAX_BATCH at most), newest first, and the total number of
    them; read in calls of ``chunk_of("dead_letters")``, in one round trip."""
    if not isinstance(offset, int) or offset < 0:
        raise InvalidArgument("offset must be an int >= 0")
    limit, size = min(positive_int("limit", limit), MAX_BATCH), chunk_of("dead_letters")
    calls = [script_call("dead_letters", keys, (offset + at, min(size, limit - at)))
             for at in range(0, limit, size)]  # fmt: skip
    replies = yield from send_all(calls)
    reply = [replies[0][0], *(v for r in replies for v in r[1:])]
    items = [
        job_info(text(reply[i]), reply[i + 2], reply[i + 3], died_at=reply[i + 1])
        for i in range(1, len(reply), 4)
    ]
    return int(reply[0]), items


_COUNTERS = (
    "enqueued", "completed", "failed", "retried", "dead_lettered", "reclaimed", "deferred",
    "superseded", "deduplicated", "replayed", "purged", "dead_evicted", "corrupt",
    "cancelled", "expired", "ticks_fired", "ticks_skipped", "ticks_missed",
)  # fmt: skip


def stats(keys: QueueKeys) -> Op[QueueStats]:
    """Sizes and counters of the queue, read in one consistent snapshot."""
    reply = yield script_call("stats", keys, ())
    values = {text(reply[i]): int(float(reply[i + 1])) for i in range(0, len(reply), 2)}
    return QueueStats(
        name=keys.name,
        pending=max(values.get("ready", 0), 0),
        held=max(values.get("held", 0), 0),
        delayed=values["delayed"],
        active=values["active"],
        dead=values["dead"],
        retained=values["retained"],
        groups=values["groups"],
        server_time=values["now"] / 1000,
        **{name: values.get(name, 0) for name in _COUNTERS},
    )


def outbox_stats(keys: QueueKeys) -> Op[QueueStats]:
    """Sizes and counters of the queue's workflow outbox (``OutboxKeys``: a queue of its
    own, in the queue's slot): entries for workflows and steps in other slots that no
    worker has delivered yet. ``pending``: waiting for a worker of the queue; ``delayed``:
    retried after a failed delivery; ``active``: being delivered; ``dead``: malformed.
    One O(1) script call, as ``stats``."""
    return (yield from stats(OutboxKeys(keys.name, keys.namespace, keys.shard_count)))


def groups(
    keys: QueueKeys, limit: int = 20, names: Sequence[str] = ()
) -> Op[tuple[int, list[GroupInfo]]]:
    """The largest groups by ready jobs, at most MAX_BATCH (or the groups named), and
    how many there are; read in calls of ``chunk_of("groups")``, in one round trip."""
    size = chunk_of("groups")
    limit = min(positive_int("limit", limit), MAX_BATCH)
    wanted = [check_group(n) for n in names]
    if wanted:
        calls = [script_call("groups", keys, (0, 0, *wanted[i : i + size]))
                 for i in range(0, len(wanted), size)]  # fmt: skip
    else:
        calls = [script_call("groups", keys, (min(size, limit - at), at))
                 for at in range(0, limit, size)]  # fmt: skip
    replies = yield from send_all(calls)
    reply = [replies[0][0], *(v for r in replies for v in r[1:])]
    items = [
        GroupInfo(
            name=text(reply[i]),
            ready=int(float(reply[i + 1])),
            active=int(reply[i + 2]),
            limit=int(reply[i + 3]) if reply[i + 3] is not None else None,
            weight=int(reply[i + 4]) if reply[i + 4] is not None else None,
        )
        for i in range(1, len(reply), 5)
    ]
    return int(reply[0]), items


def configure(
    keys: QueueKeys,
    *,
    queue: Mapping[str, int | None] | None = None,
    limits: Mapping[str, int | None] | None = None,
    weights: Mapping[str, int | None] | None = None,
) -> Op[None]:
    """Store shared settings: queue-wide values, per-group limits and weights.
    None removes a setting (back to its default)."""
    args: list[Arg] = []
    for name, value in (queue or {}).items():
        if name not in CONF_DEFAULTS:
            raise InvalidArgument(f"unknown queue setting {name!r}: {sorted(CONF_DEFAULTS)}")
        args += ["queue", name, "" if value is None else natural(name, value)]
    for g, value in (limits or {}).items():
        args += ["limit", check_group(g), "" if value is None else natural("limit", value)]
    for g, value in (weights or {}).items():
        # a weight of 0 would give the group no turn at all (and drop it from the
        # rotation with its jobs ready): at least 1
        args += ["weight", check_group(g), "" if value is None else positive_int("weight", value)]
    # several calls for many settings (in one round trip, applied in order)
    size = 3 * chunk_of("configure")
    if args:
        yield from send_all(
            [script_call("configure", keys, args[i : i + size]) for i in range(0, len(args), size)]
        )


_KEY_TYPES = {
    "jobs": "hash", "rr": "list", "rrset": "set", "active": "zset", "delayed": "zset",
    "dead": "zset", "done": "zset", "reasons": "hash", "keys": "hash", "stats": "hash",
    "conf": "hash", "wake": "zset", "groups": "zset", "gactive": "hash", "glimit": "hash",
    "gweight": "hash", "pending": "list", "prio": "zset",
    "ctl": "hash", "progress": "hash",
}  # fmt: skip


def check(keys: QueueKeys) -> Op[list[str]]:
    """The queue's keys that hold another Redis type than durq's (empty when sound)."""
    problems: list[str] = []
    for part, expected in _KEY_TYPES.items():
        key = keys.prefix + part
        found = text((yield Command(("TYPE", key))))
        if found not in ("none", expected):
            problems.append(f"{key} is a {found}, expected a {expected}")
    return problems
