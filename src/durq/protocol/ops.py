"""Queue operations as IO-free generators: validate, pack arguments, parse replies.

Each function returns an :data:`Op`; the sync and asyncio queues drive it. Batches larger
than :data:`MAX_BATCH` are split into several script calls sent in one pipeline, so every
batch operation takes one round trip and no script runs for long.
"""

from __future__ import annotations

import base64
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

import orjson

from durq import lua
from durq.codec import PayloadCodec
from durq.durability import Durability, NotDurable
from durq.errors import CorruptQueue, InvalidArgument
from durq.keys import QueueKeys, TopicKeys, check_group, check_job_id, check_key
from durq.models import (
    EnqueueResult,
    EnqueueStatus,
    GroupInfo,
    Job,
    JobInfo,
    JobState,
    Message,
    QueueStats,
)
from durq.protocol.calls import Arg, Command, Op, Pipeline, ScriptCall
from durq.protocol.record import STATE_NAMES, parse_record
from durq.protocol.status import Status

__all__ = [
    "CONF_DEFAULTS",
    "MAX_BATCH",
    "MAX_BLOCK",
    "Held",
    "check",
    "configure",
    "dead_letters",
    "defer",
    "dequeue",
    "enqueue",
    "extend",
    "fetch",
    "fetch_after_wait",
    "groups",
    "job",
    "new_ids",
    "publish",
    "purge",
    "release",
    "replay",
    "requeue",
    "stats",
    "wait_result",
]

MAX_BATCH = 1000
#: the longest single blocking wait; longer waits are several, so a dead server is noticed
MAX_BLOCK = 5.0
#: the shortest server-side block: Redis 6.2 truncates a blocking timeout to whole ms,
#: and one that truncates to 0 (0.001 s is stored as 0.000999...) means "block forever"
MIN_BLOCK = 0.002
MAX_DELAY = 10 * 365 * 86400.0
MAX_LEASE = 7 * 86400.0
MIN_LEASE = 0.05
MAX_REASON_BYTES = 64 * 1024
PRIORITY_RANGE = range(-10, 11)
MAX_ATTEMPTS_RANGE = range(1, 10001)
#: queue settings and their defaults, the same as in lua/lib/conf.lua
CONF_DEFAULTS: dict[str, int] = {"group_limit": 0, "dedup_window": 60000, "dead_cap": 0}

_STATE = {code: JobState(name) for code, name in STATE_NAMES.items()}


class Held(Protocol):
    """Anything that names a job and the lease token it was handed out with."""

    @property
    def id(self) -> str: ...

    @property
    def token(self) -> str: ...


def new_ids(n: int) -> list[str]:
    """``n`` random job ids: 16 characters (96 random bits) each, from letters, digits,
    ``_`` and ``.`` (not ``-``, so an id never reads as an option on a command line)."""
    raw = base64.b64encode(os.urandom(12 * n), altchars=b"._").decode()
    return [raw[i : i + 16] for i in range(0, 16 * n, 16)]


# -- argument checks ----------------------------------------------------------------


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument(f"{name} must be a number of seconds, got {value!r}")
    if not math.isfinite(value):
        raise InvalidArgument(f"{name} must be finite, got {value!r}")
    return float(value)


def delay_ms(value: Any, name: str = "delay") -> int:
    """Seconds to ms; 0 <= value <= ten years."""
    seconds = _number(name, value)
    if not 0 <= seconds <= MAX_DELAY:
        raise InvalidArgument(f"{name} must be between 0 and {MAX_DELAY:.0f} s, got {value!r}")
    return round(seconds * 1000)


def lease_ms(value: Any) -> int:
    """Seconds to ms; MIN_LEASE <= value <= one week."""
    seconds = _number("lease", value)
    if not MIN_LEASE <= seconds <= MAX_LEASE:
        raise InvalidArgument(
            f"lease must be between {MIN_LEASE} and {MAX_LEASE:.0f} s, got {value!r}"
        )
    return round(seconds * 1000)


def _int_in(name: str, value: Any, allowed: range) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value not in allowed:
        raise InvalidArgument(f"{name} must be an int in {allowed.start}..{allowed.stop - 1}")
    return value


def _count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(f"{name} must be a positive int, got {value!r}")
    return value


def reason_json(reason: str | Mapping[str, Any] | None, **extra: Any) -> bytes:
    """Encode a failure reason as the JSON object stored with the job."""
    fields: dict[str, Any] = {}
    if isinstance(reason, Mapping):
        fields.update(reason)
    elif reason is not None:
        fields["message"] = str(reason)
    fields.update(extra)
    fields.setdefault("reason", "failed")
    data = orjson.dumps(fields, default=str)
    if len(data) > MAX_REASON_BYTES:  # tracebacks can be huge; keep the head
        for name in ("traceback", "message"):
            text = str(fields.get(name, ""))
            if len(text) > MAX_REASON_BYTES // 4:
                fields[name] = text[: MAX_REASON_BYTES // 4] + " ...[truncated]"
        data = orjson.dumps(fields, default=str)[:MAX_REASON_BYTES]
    return data


# -- plumbing -----------------------------------------------------------------------


def _call(name: str, keys: QueueKeys, args: Sequence[Arg]) -> ScriptCall:
    return ScriptCall(lua.load(name), keys.vector, args)


def _batched(
    name: str,
    keys: QueueKeys,
    head: Sequence[Arg],
    rows: Sequence[Sequence[Arg]],
    tail: Command | None = None,
) -> Op[list[Any]]:
    """Run a per-item script over ``rows`` in calls of at most MAX_BATCH items, in one
    round trip; returns the replies in order. ``tail`` (e.g. WAIT) is sent last on the
    same connection and its reply appended."""
    chunks = [rows[i : i + MAX_BATCH] for i in range(0, len(rows), MAX_BATCH)] or [[]]
    calls: tuple[ScriptCall | Command, ...] = tuple(
        _call(name, keys, [*head, len(chunk), *(v for row in chunk for v in row)])
        for chunk in chunks
    )
    if tail is not None:
        calls = (*calls, tail)
    if len(calls) == 1:
        return [(yield calls[0])]
    replies = yield Pipeline(calls)
    for reply in replies[: len(chunks)]:
        if isinstance(reply, Exception):
            raise reply
    return list(replies)


def block_timeout(seconds: float) -> float:
    """The timeout to send with a blocking command (BZPOPMIN, BLMOVE) for a wait of
    ``seconds``: between MIN_BLOCK and MAX_BLOCK."""
    return min(max(seconds, MIN_BLOCK), MAX_BLOCK)


def script_error(exc: Exception) -> Exception:
    """Translate a script's error reply into a durq exception (others pass through)."""
    text = str(exc)
    if "DURQ_WRONGTYPE" in text:  # the script found it before changing anything
        detail = text.split("DURQ_WRONGTYPE", 1)[-1].strip()
        return CorruptQueue(
            f"{detail}: something other than durq wrote there; nothing was changed, and "
            "calls that need the key fail until it is removed (see `durq doctor`)"
        )
    if "WRONGTYPE" in text:
        detail = text.split("DURQ_WRONGTYPE", 1)[-1].strip()
        return CorruptQueue(
            f"a durq key holds another Redis type ({detail}); run `durq doctor` to see which"
        )
    if "DURQ_ARG" in text:
        return InvalidArgument(text.split("DURQ_ARG", 1)[-1].strip())
    return exc


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# -- enqueue ------------------------------------------------------------------------


def _enqueue_rows(
    codec: PayloadCodec,
    messages: Sequence[Message],
    *,
    delay: float,
    priority: int,
    max_attempts: int,
    group: str | None,
    key: str | None,
    replace: bool,
    ids: Sequence[str] | None = None,
) -> list[tuple[Arg, ...]]:
    """The nine script arguments of each message (see enqueue.lua). ``ids``, when
    given, are the ids of the messages that have none (generated by the caller, so that
    a retry reuses them)."""
    # the batch's defaults are checked once; a message's own options only when given
    d_delay = delay_ms(delay)
    d_prio = _int_in("priority", priority, PRIORITY_RANGE)
    d_max = _int_in("max_attempts", max_attempts, MAX_ATTEMPTS_RANGE)
    d_group = check_group(group) if group is not None else ""
    d_key = check_key(key) if key is not None else ""
    fresh = iter(ids if ids is not None else new_ids(sum(1 for m in messages if m.id is None)))
    encode = codec.encode
    rows: list[tuple[Arg, ...]] = []
    for m in messages:
        k = d_key if m.key is None else check_key(m.key)
        rep = replace if m.replace is None else m.replace
        if rep and not k:
            raise InvalidArgument("replace=True needs a key: it replaces the job holding it")
        codec_id, data = encode(m.payload)
        rows.append(
            (
                next(fresh) if m.id is None else check_job_id(m.id),
                data,
                d_delay if m.delay is None else delay_ms(m.delay),
                d_prio if m.priority is None else _int_in("priority", m.priority, PRIORITY_RANGE),
                d_max if m.max_attempts is None
                else _int_in("max_attempts", m.max_attempts, MAX_ATTEMPTS_RANGE),
                codec_id,
                d_group if m.group is None else check_group(m.group),
                k,
                1 if rep else 0,
            )
        )  # fmt: skip
    return rows


def _enqueue_result(status: Status, ref: str, own_id: str) -> EnqueueResult:
    if status is Status.REPLACED:
        return EnqueueResult(own_id, EnqueueStatus.REPLACED, ref)
    return EnqueueResult(ref, EnqueueStatus[status.name])


def enqueue(
    keys: QueueKeys,
    codec: PayloadCodec,
    messages: Sequence[Message],
    *,
    delay: float = 0,
    priority: int = 0,
    max_attempts: int,
    group: str | None = None,
    key: str | None = None,
    replace: bool = False,
    durability: Durability | None = None,
    ids: Sequence[str] | None = None,
) -> Op[list[EnqueueResult]]:
    """Add ``messages``; per-message options override the keyword defaults. With an
    active ``durability``, confirm the copies in the same round trip (NotDurable)."""
    rows = _enqueue_rows(
        codec, messages, delay=delay, priority=priority, max_attempts=max_attempts,
        group=group, key=key, replace=replace, ids=ids,
    )  # fmt: skip
    confirm = durability if durability is not None and durability.active else None
    tail = Command(confirm.command()) if confirm is not None else None
    # jobs without delay, priority or key (the common case) have a leaner script
    plain = all(row[2] == 0 and row[3] == 0 and row[7] == "" for row in rows)
    script = "enqueue_plain" if plain else "enqueue"
    replies = yield from _batched(script, keys, (), rows, tail)
    if confirm is not None:
        confirmation = replies.pop()
    out: list[EnqueueResult] = []
    for reply in replies:
        for i in range(0, len(reply), 2):
            own_id = str(rows[len(out)][0])
            out.append(_enqueue_result(Status(reply[i]), _text(reply[i + 1]), own_id))
    if confirm is not None:
        try:
            confirm.check(confirmation)
        except NotDurable as exc:
            exc.results = out
            raise
    return out


def publish(
    topic: TopicKeys,
    codec: PayloadCodec,
    messages: Sequence[Message],
    *,
    delay: float = 0,
    priority: int = 0,
    max_attempts: int,
    group: str | None = None,
    key: str | None = None,
    replace: bool = False,
    durability: Durability | None = None,
    ids: Sequence[str] | None = None,
) -> Op[dict[str, list[EnqueueResult]]]:
    """Enqueue ``messages`` into every subscription of ``topic`` atomically; returns the
    results per subscriber (empty when the topic has no subscribers)."""
    rows = _enqueue_rows(
        codec, messages, delay=delay, priority=priority, max_attempts=max_attempts,
        group=group, key=key, replace=replace, ids=ids,
    )  # fmt: skip
    out: dict[str, list[EnqueueResult]] = {}
    for start in range(0, len(rows), MAX_BATCH):
        chunk = rows[start : start + MAX_BATCH]
        args = [topic.base, len(chunk), *(v for row in chunk for v in row)]
        # the base, never a key itself, guards a Cluster slot migration: see publish.lua
        call = ScriptCall(lua.load("publish"), (topic.subscribers, topic.base), args)
        if durability is not None and durability.active:
            reply, confirmation = yield Pipeline((call, Command(durability.command())))
            if isinstance(reply, Exception):
                raise reply
            durability.check(confirmation)
        else:
            reply = yield call
        for i in range(0, len(reply), 3):
            results = out.setdefault(_text(reply[i]), [])
            own_id = str(chunk[(len(results)) % len(chunk)][0])
            results.append(_enqueue_result(Status(reply[i + 1]), _text(reply[i + 2]), own_id))
    return out


# -- dequeue ------------------------------------------------------------------------


def parse_dequeue(reply: Sequence[Any], queue: str, codec: PayloadCodec) -> list[Job]:
    """Turn a dequeue reply into Jobs (the header fields are read by the caller)."""
    deadline = reply[1] / 1000
    jobs: list[Job] = []
    for i in range(4, len(reply), 2):
        raw: bytes = reply[i + 1]
        # leniently: a group or key that is not UTF-8 (garbage written by something else)
        # must not make the whole batch, already handed out, fail here
        rec = parse_record(raw, errors="replace")
        if rec is None:  # the script hands out only records it could read
            raise CorruptQueue("dequeue returned an unreadable record")
        jobs.append(
            Job(
                queue=queue,
                id=reply[i].decode(),
                token=f"{rec.deliveries}.{rec.dequeued_at_ms}",
                attempt=rec.attempts,
                max_attempts=rec.max_attempts,
                deliveries=rec.deliveries,
                priority=rec.priority,
                group=rec.group or None,
                key=rec.key or None,
                enqueued_at=rec.enqueued_at_ms / 1000,
                lease_deadline=deadline,
                codec_id=rec.codec,
                data=raw[rec.payload_offset :],
                codec=codec,
            )
        )
    return jobs


def dequeue_call(keys: QueueKeys, count: int, lease: float) -> ScriptCall:
    """The script call behind one dequeue attempt (for pipelining with other calls)."""
    return _call("dequeue", keys, (_count("count", count), lease_ms(lease)))


def fetch(
    keys: QueueKeys, codec: PayloadCodec, count: int, lease: float
) -> Op[tuple[list[Job], int, int]]:
    """One dequeue attempt for workers: the jobs, the ms until there may be more work
    (-1: nothing scheduled), and how many expired leases it reclaimed."""
    reply = yield dequeue_call(keys, count, lease)
    return parse_dequeue(reply, keys.name, codec), int(reply[2]), int(reply[3])


def fetch_after_wait(
    keys: QueueKeys, codec: PayloadCodec, count: int, lease: float, timeout: float
) -> Op[tuple[list[Job], int, int]]:
    """Block on the wake marker up to ``timeout`` seconds, then fetch (``fetch``): both in
    one round trip, so a job enqueued to an idle queue is in hand one round trip after
    the enqueue (the server runs the fetch as soon as the wait ends)."""
    block = Command(("BZPOPMIN", keys.wake, block_timeout(min(timeout, MAX_BLOCK))))
    replies = yield Pipeline((block, dequeue_call(keys, count, lease)))
    for reply in replies:
        if isinstance(reply, BaseException):
            raise reply
    reply = replies[1]
    return parse_dequeue(reply, keys.name, codec), int(reply[2]), int(reply[3])


def dequeue(
    keys: QueueKeys,
    codec: PayloadCodec,
    count: int,
    lease: float,
    wait: float | None = None,
) -> Op[list[Job]]:
    """Take up to ``count`` jobs under a lease; with ``wait``, block up to that long
    (without polling) for the first job to arrive."""
    call = dequeue_call(keys, count, lease)
    if wait is not None:
        wait = _number("wait", wait)
        if wait < 0:
            raise InvalidArgument(f"wait must be >= 0, got {wait!r}")
    give_up: float | None = None
    reply = yield call
    while True:
        jobs = parse_dequeue(reply, keys.name, codec)
        if jobs or not wait:
            return jobs
        now = time.monotonic()
        if give_up is None:
            give_up = now + wait
        remaining = give_up - now
        if remaining <= 0:
            return jobs
        next_ms = reply[2]
        timeout = remaining if next_ms < 0 else min(remaining, next_ms / 1000)
        if timeout < 0.001:
            reply = yield call
            continue
        # the dequeue runs on the server right after the wait ends: one round trip
        block = Command(("BZPOPMIN", keys.wake, block_timeout(timeout)))
        replies = yield Pipeline((block, call))
        if isinstance(replies[1], BaseException):
            raise replies[1]
        reply = replies[1]
        if isinstance(replies[0], BaseException) and len(reply) == 4:  # and no job came
            # else the failing wait would return at once, again and again until `wait`
            raise CorruptQueue(
                f"{keys.wake} holds another Redis type where durq keeps a zset (the wake-up "
                "marker): remove it"
            ) from replies[0]


# -- release, requeue, extend, defer ------------------------------------------------


def _statuses(replies: Sequence[Sequence[Any]], skip: int = 0) -> list[Status]:
    return [Status(s) for reply in replies for s in reply[skip:]]


def release(
    keys: QueueKeys,
    jobs: Sequence[Held],
    *,
    keep: float = 0,
    results: Sequence[bytes | None] | None = None,
    result_ttl: float = 3600,
) -> Op[list[Status]]:
    """Release ``jobs`` (done); optionally keep their records and store results."""
    if results is not None and len(results) != len(jobs):
        raise InvalidArgument("results must have one entry per job")
    head = (delay_ms(keep, "keep"), delay_ms(result_ttl, "result_ttl"))
    rows = [
        (j.id, j.token, (results[i] or b"") if results is not None else b"")
        for i, j in enumerate(jobs)
    ]
    return _statuses((yield from _batched("release", keys, head, rows)))


def requeue(
    keys: QueueKeys,
    items: Sequence[tuple[Held, float, bytes, bool]],
    *,
    results: Sequence[bytes | None] | None = None,
    result_ttl: float = 3600,
) -> Op[list[Status]]:
    """Requeue failed jobs: ``(job, delay seconds, reason JSON, dead-letter now)``.
    ``results`` (one per job or None) are stored for jobs that end up dead-lettered."""
    if results is not None and len(results) != len(items):
        raise InvalidArgument("results must have one entry per job")
    rows = [
        (j.id, j.token, delay_ms(delay), reason, 1 if dead else 0,
         (results[i] or b"") if results is not None else b"")
        for i, (j, delay, reason, dead) in enumerate(items)
    ]  # fmt: skip
    head = (delay_ms(result_ttl, "result_ttl"),)
    return _statuses((yield from _batched("requeue", keys, head, rows)))


def extend(keys: QueueKeys, jobs: Sequence[Held], lease: float) -> Op[tuple[float, list[Status]]]:
    """Extend the leases of ``jobs`` to ``lease`` seconds from now (server time)."""
    rows = [(j.id, j.token) for j in jobs]
    replies = yield from _batched("extend", keys, (lease_ms(lease),), rows)
    return replies[0][0] / 1000, _statuses(replies, skip=1)


def defer(keys: QueueKeys, items: Sequence[tuple[Held, float]]) -> Op[list[Status]]:
    """Put jobs back after ``delay`` seconds without counting an attempt."""
    rows = [(j.id, j.token, delay_ms(delay)) for j, delay in items]
    return _statuses((yield from _batched("defer", keys, (), rows)))


def wait_result(keys: QueueKeys, job_id: str, timeout: float) -> Op[bytes | None]:
    """The stored result of ``job_id``, waiting up to ``timeout`` seconds for it
    without polling (BLMOVE onto the same one-element list leaves it in place)."""
    key = keys.result(check_job_id(job_id))
    give_up = time.monotonic() + _number("timeout", timeout)
    while True:
        remaining = give_up - time.monotonic()
        if remaining < 0.001:
            reply: bytes | None = yield Command(("LINDEX", key, 0))
            return reply
        block = block_timeout(remaining)
        reply = yield Command(("BLMOVE", key, key, "RIGHT", "LEFT", block))
        if reply is not None:
            return reply


# -- dead letters -------------------------------------------------------------------


def _id_list(ids: str | Sequence[str]) -> list[str]:
    return [check_job_id(ids)] if isinstance(ids, str) else [check_job_id(i) for i in ids]


def _bulk_dead(name: str, keys: QueueKeys, ids: str | Sequence[str] | None) -> Op[int]:
    done = 0
    if ids is not None:
        wanted = _id_list(ids)
        for i in range(0, len(wanted), MAX_BATCH):
            reply = yield _call(name, keys, ("ids", 0, *wanted[i : i + MAX_BATCH]))
            done += sum(1 for s in reply[1::2] if s == Status.OK)
        return done
    for _ in range(100_000):  # "all": bounded calls until a short page
        reply = yield _call(name, keys, ("oldest", MAX_BATCH))
        done += sum(1 for s in reply[1::2] if s == Status.OK)
        if len(reply) // 2 < MAX_BATCH or not any(s == Status.OK for s in reply[1::2]):
            break
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
) -> JobInfo:
    """Build a JobInfo from a stored record and the scores that surround it (ms)."""
    base = JobInfo(
        job_id,
        JobState.COMPLETED,  # a tombstone: finished, record not kept
        lease_deadline=_seconds(lease_deadline),
        due_at=_seconds(due_at),
        died_at=_seconds(died_at),
        retained_until=_seconds(retained_until),
        reason=_reason(reason),
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
    )


def job(keys: QueueKeys, job_id: str) -> Op[JobInfo | None]:
    """Everything stored about ``job_id``; None when the queue knows nothing of it."""
    raw, reason, lease, due, died, retained, _now = yield _call(
        "job", keys, (check_job_id(job_id),)
    )
    if raw is None and retained is None:
        return None
    return job_info(job_id, raw, reason, lease_deadline=lease, due_at=due, died_at=died,
                    retained_until=retained)  # fmt: skip


def dead_letters(
    keys: QueueKeys, offset: int = 0, limit: int = 100
) -> Op[tuple[int, list[JobInfo]]]:
    """A page of dead letters, newest first, and the total number of them."""
    if not isinstance(offset, int) or offset < 0:
        raise InvalidArgument("offset must be an int >= 0")
    limit = min(_count("limit", limit), MAX_BATCH)
    reply = yield _call("dead_letters", keys, (offset, limit))
    items = [
        job_info(_text(reply[i]), reply[i + 2], reply[i + 3], died_at=reply[i + 1])
        for i in range(1, len(reply), 4)
    ]
    return int(reply[0]), items


_COUNTERS = (
    "enqueued", "completed", "failed", "retried", "dead_lettered", "reclaimed", "deferred",
    "superseded", "deduplicated", "replayed", "purged", "dead_evicted", "corrupt",
)  # fmt: skip


def stats(keys: QueueKeys) -> Op[QueueStats]:
    """Sizes and counters of the queue, read in one consistent snapshot."""
    reply = yield _call("stats", keys, ())
    values = {_text(reply[i]): int(float(reply[i + 1])) for i in range(0, len(reply), 2)}
    return QueueStats(
        name=keys.name,
        pending=max(values.get("ready", 0), 0),
        delayed=values["delayed"],
        active=values["active"],
        dead=values["dead"],
        retained=values["retained"],
        groups=values["groups"],
        server_time=values["now"] / 1000,
        **{name: values.get(name, 0) for name in _COUNTERS},
    )


def groups(
    keys: QueueKeys, limit: int = 20, names: Sequence[str] = ()
) -> Op[tuple[int, list[GroupInfo]]]:
    """The largest groups by ready jobs (or the groups named) and how many there are."""
    limit = min(_count("limit", limit), MAX_BATCH)
    reply = yield _call("groups", keys, (limit, *(check_group(n) for n in names)))
    items = [
        GroupInfo(
            name=_text(reply[i]),
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
        args += ["queue", name, "" if value is None else _natural(name, value)]
    for scope, table in (("limit", limits), ("weight", weights)):
        for g, value in (table or {}).items():
            args += [scope, check_group(g), "" if value is None else _natural(scope, value)]
    if args:
        yield _call("configure", keys, args)


_KEY_TYPES = {
    "jobs": "hash", "rr": "list", "rrset": "set", "active": "zset", "delayed": "zset",
    "dead": "zset", "done": "zset", "reasons": "hash", "keys": "hash", "stats": "hash",
    "conf": "hash", "wake": "zset", "groups": "zset", "gactive": "hash", "glimit": "hash",
    "gweight": "hash", "pending": "list", "prio": "zset",
}  # fmt: skip


def check(keys: QueueKeys) -> Op[list[str]]:
    """The queue's keys that hold another Redis type than durq's (empty when sound)."""
    problems: list[str] = []
    for part, expected in _KEY_TYPES.items():
        key = keys.prefix + part
        found = _text((yield Command(("TYPE", key))))
        if found not in ("none", expected):
            problems.append(f"{key} is a {found}, expected a {expected}")
    return problems


def _natural(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument(f"{name} must be an int >= 0, got {value!r}")
    return value
