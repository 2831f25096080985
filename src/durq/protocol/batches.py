"""Batch consumption (``durq.Batch``) as IO-free operations: fetching the items of a
batch, forming one (``Forming``: up to ``max_size`` items, or what came within
``max_wait`` of the first), settling every item in one call, and the queue's batch
history.

A batch's items are ordinary jobs, each leased to the batch with its own token: the
batch modes of ``dequeue.lua`` count a group's items in a batch as one holder of the
group's slot (ARGV[4] ``b``), take a batch from one group (``g``, durq.Batch(by_group=
True)) and top such a batch up from its group (``t``); ``settle.lua`` ends each item as
release, requeue, defer or rate_limited would, fenced per item.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

from durq.codec import PayloadCodec
from durq.errors import CorruptQueue, InvalidArgument
from durq.keys import QueueKeys
from durq.models import BatchRecord, Job, Settle
from durq.protocol.args import delay_ms, lease_ms, reason_json, seconds
from durq.protocol.calls import (
    IDLE_BLOCK,
    MAX_BLOCK,
    MAX_CALL_BYTES,
    Arg,
    Command,
    Op,
    Pipeline,
    ScriptCall,
    Sleep,
    block_timeout,
    chunk_of,
    script_call,
    send_all,
    text,
)
from durq.protocol.lifecycle import PRECISE_WAIT_MS, Leased, parse_dequeue
from durq.protocol.limits import _other_shards
from durq.protocol.status import Status, statuses

__all__ = [
    "HISTORY",
    "MAX_SIZE",
    "MAX_WAIT",
    "Forming",
    "cause_of",
    "dequeue_batch",
    "fetch",
    "fetch_after_wait",
    "history",
    "settle",
    "settle_chunks",
    "settle_done",
    "settle_rows",
]

#: the largest batch: what one dequeue call hands out at most (calls.MAX_BATCH)
MAX_SIZE = 1000
#: the longest max_wait, in seconds: a partial batch's items stay leased meanwhile
MAX_WAIT = 60.0
#: the batches the queue's history keeps (settle.lua)
HISTORY = 100
#: how late the server may end a blocking wait (1/hz s at its default hz of 10): a
#: partial batch's last stretch of max_wait is slept rather than blocked
SERVER_LATE = 0.1
#: the first sleep of a forming batch of one group whose waits keep taking back the
#: wake-up its own empty top-ups pass on (doubled at each one; see dequeue_batch)
PASS_ON_BACKOFF = 0.002

#: an outcome of settle.lua for each kind of Settle
_CODES = {"done": "d", "retry": "r", "dead": "x", "defer": "f"}

#: a settle row: the item, its outcome's code (settle.lua), a delay in seconds, its
#: reason (JSON) and its result (encoded), each b"" when it has none
Row = tuple[Leased, str, float, bytes, bytes]


def _mode(by_group: bool, group: str | None) -> str:
    """dequeue.lua's batch mode (ARGV[4]): a top-up of ``group``'s batch, a batch of one
    group, or a batch."""
    if group is not None:
        return "t"
    return "g" if by_group else "b"


def fetch_call(
    keys: QueueKeys,
    count: int,
    lease: float,
    *,
    by_group: bool = False,
    group: str | None = None,
    consumer: str = "",
) -> ScriptCall:
    """The dequeue call that takes up to ``count`` items for a batch (see ``fetch``)."""
    args: list[Arg] = [count, lease_ms(lease), consumer, _mode(by_group, group)]
    if group is not None:
        args.append(group)
    return script_call("dequeue", keys, args)


def fetch(
    keys: QueueKeys,
    codec: PayloadCodec,
    count: int,
    lease: float,
    *,
    by_group: bool = False,
    group: str | None = None,
    consumer: str = "",
) -> Op[tuple[list[Job], int, int]]:
    """Take up to ``count`` items for a batch, each leased for ``lease`` seconds: a
    group's items hold one of its slots together under a group limit; ``by_group``:
    from one group, the groups served in turn; ``group``: more for a batch of that
    group (a top-up). Returns the items, the ms until there may be more work (-1:
    nothing scheduled; 0: the call stopped for its budget, ask again now) and the
    expired leases it reclaimed, as ``lifecycle.fetch``."""
    call = fetch_call(keys, count, lease, by_group=by_group, group=group, consumer=consumer)
    reply = yield call
    return parse_dequeue(reply, keys.name, codec), int(reply[2]), int(reply[3])


def fetch_after_wait(
    keys: QueueKeys,
    codec: PayloadCodec,
    count: int,
    lease: float,
    timeout: float,
    *,
    by_group: bool = False,
    group: str | None = None,
    consumer: str = "",
    ring: str = "",
) -> Op[tuple[list[Job], int, int]]:
    """Block on the wake marker (and ``ring``, a marker of this consumer's own) up to
    ``timeout`` seconds, then ``fetch``: both in one round trip."""
    markers = (keys.wake, ring) if ring else (keys.wake,)
    block = Command(("BZPOPMIN", *markers, block_timeout(timeout)))
    call = fetch_call(keys, count, lease, by_group=by_group, group=group, consumer=consumer)
    waited, reply = yield Pipeline((block, call))
    if isinstance(reply, BaseException):
        raise reply
    if isinstance(waited, BaseException) and len(reply) == 4:
        raise CorruptQueue(
            f"{keys.wake} holds another Redis type where durq keeps a zset (the wake-up "
            "marker): remove it"
        ) from waited
    return parse_dequeue(reply, keys.name, codec), int(reply[2]), int(reply[3])


def cause_of(size: int, max_size: int) -> Literal["size", "wait"]:
    """Why a batch of ``size`` items started: it reached ``max_size``, or its
    ``max_wait`` ran out first (the metrics and the batch history record it)."""
    return "size" if size >= max_size else "wait"


class Forming:
    """A batch being formed: up to ``max_size`` items, or what came within ``max_wait``
    seconds of the first (the clock is the caller's: ``time.monotonic``, or a test's).
    No IO: the worker and ``Queue.dequeue_batch`` each fetch and wait, and ask it what
    comes next.

    The items are leased to the batch as they are fetched, never buffered beyond it: a
    fetch leases them for the lease plus what is left of ``max_wait`` (``lease_for``),
    so they need no extension before the batch starts."""

    def __init__(self, max_size: int, max_wait: float, by_group: bool) -> None:
        self.max_size = max_size
        self.max_wait = max_wait
        self.by_group = by_group
        self.jobs: list[Job] = []
        self.first_at: float | None = None  # when the first item was fetched
        #: the group of a batch of one group ('' is the default group), once it has items
        self.group: str | None = None

    def add(self, jobs: Sequence[Job], now: float) -> None:
        """Items fetched at ``now``."""
        if not jobs:
            return
        if self.first_at is None:
            self.first_at = now
            if self.by_group:
                self.group = jobs[0].group or ""
        self.jobs.extend(jobs)

    def want(self) -> int:
        """How many more items the batch takes."""
        return self.max_size - len(self.jobs)

    @property
    def full(self) -> bool:
        """True once it holds ``max_size`` items: it starts now."""
        return len(self.jobs) >= self.max_size

    def left(self, now: float) -> float:
        """Seconds until the batch starts with what it holds (its ``max_wait`` is up);
        ``max_wait`` itself while it holds nothing."""
        if self.first_at is None:
            return self.max_wait
        return max(self.first_at + self.max_wait - now, 0.0)

    def ready(self, now: float) -> bool:
        """True when the batch starts now: full, or it holds items and its wait is up."""
        return self.full or (self.first_at is not None and self.left(now) <= 0)

    def starts(self, now: float, got: int, next_ms: int) -> bool:
        """Whether the batch starts now, after a fetch at ``now`` that took ``got`` items
        and answered ``next_ms``: it is ``ready``, unless that fetch stopped for its
        budget (``next_ms`` 0) with items, which leaves more ready now: the batch takes
        them before it starts, whatever its ``max_wait``."""
        return self.ready(now) and (self.full or not got or next_ms != 0)

    def cause(self) -> Literal["size", "wait"]:
        """Why it started: ``max_size`` items, or ``max_wait`` (metrics, history)."""
        return cause_of(len(self.jobs), self.max_size)

    def lease_for(self, lease: float, now: float) -> float:
        """The lease of items fetched at ``now``: ``lease`` once the batch starts."""
        return lease + self.left(now)

    def top_up_group(self) -> str | None:
        """The group a top-up fetches from (a batch of one group), else None."""
        return self.group if self.by_group and self.first_at is not None else None


def dequeue_batch(
    keys: QueueKeys,
    codec: PayloadCodec,
    max_size: int,
    max_wait: float,
    lease: float,
    *,
    by_group: bool = False,
    wait: float | None = None,
    stopping: Callable[[], bool] | None = None,
    ring: str = "",
    clock: Callable[[], float] = time.monotonic,
) -> Op[list[Job]]:
    """Form a batch (``Forming``): block up to ``wait`` seconds for its first item (no
    wait: none), then up to ``max_wait`` seconds from it while it holds fewer than
    ``max_size``, blocking on the wake marker between top-ups (no polling). Returns its
    items, leased together (``Queue.dequeue_batch``). ``stopping``: asked after each
    wake-up while no item came; True ends the wait for the first item (a worker that
    stops sets the wake marker). ``ring``: a worker's own marker (same slot), which ends
    a wait too; a worker's single block then lasts up to IDLE_BLOCK, not MAX_BLOCK.
    ``clock``: seconds, what ``max_wait`` is timed by (the model test's is the frozen
    server's)."""
    markers = (keys.wake, ring) if ring else (keys.wake,)
    longest = IDLE_BLOCK if ring else MAX_BLOCK
    max_size, max_wait, lease = check_batch(max_size, max_wait, lease)
    if wait is not None and not seconds("wait", wait) >= 0:
        raise InvalidArgument(f"wait must be >= 0, got {wait!r}")
    forming = Forming(max_size, max_wait, by_group)
    give_up = clock() + (wait or 0)
    timeout, precise = 0.0, False
    idle = 0  # top-ups in a row that a wake-up (or a backoff) ended and that took nothing
    backoff = False  # the next wait is a backoff's sleep
    while True:
        now = clock()
        group = forming.top_up_group()
        call = fetch_call(
            keys, forming.want(), forming.lease_for(lease, now), by_group=by_group, group=group
        )
        blocked = woken = False
        if timeout <= 0:
            reply = (yield from send_all([call]))[0]
        elif precise:
            yield Sleep(timeout)  # on time (see calls.Sleep and lifecycle.dequeue)
            reply = (yield from send_all([call]))[0]
        else:
            block = Command(("BZPOPMIN", *markers, block_timeout(timeout, longest)))
            waited, reply = yield Pipeline((block, call))
            if isinstance(reply, BaseException):
                raise reply
            blocked, woken = True, waited is not None and not isinstance(waited, BaseException)
        now = clock()
        got = parse_dequeue(reply, keys.name, codec)
        forming.add(got, now)
        next_ms = int(reply[2])
        if forming.starts(now, len(got), next_ms):
            return forming.jobs
        if got or (blocked and not woken):
            idle = 0
        elif (woken or backoff) and group is not None:
            idle += 1
        if forming.first_at is None:  # no item yet: wait for the first, up to `wait`
            timeout = give_up - now
            if timeout <= 0 or (stopping is not None and stopping()):
                return []
        else:
            timeout = forming.left(now)
        timeout, precise = _plan_wait(timeout, next_ms, partial=forming.first_at is not None)
        backoff = idle >= 2 and timeout > 0 and not precise
        if backoff:
            # a top-up that takes nothing passes the wake-up on to the other groups'
            # consumers (dequeue.lua 't'); with none of them blocked, this wait takes it
            # back at once, again and again: woken twice in a row for nothing, it sleeps
            # instead, twice as long each time, and looks again (a few round trips per
            # max_wait, not one after the other)
            timeout, precise = min(timeout, PASS_ON_BACKOFF * 2 ** (idle - 2)), True


def _plan_wait(timeout: float, next_ms: int, *, partial: bool) -> tuple[float, bool]:
    """How long the next wait of ``dequeue_batch`` is (at most ``timeout``), and whether
    it is slept here (precise) rather than blocked on the wake marker; ``next_ms`` is
    what the last fetch said of the next work due."""
    precise = False
    if next_ms == 0:  # the call stopped for its budget, or work is due: at once
        return 0.0, False
    if next_ms > 0 and next_ms / 1000 < timeout:  # work is due before
        timeout = next_ms / 1000
        precise = next_ms < PRECISE_WAIT_MS
    if partial and timeout > 0 and not precise:
        # a partial batch starts when its max_wait is up, on time: the server ends a
        # blocking wait up to 1/hz s late (100 ms at its default hz), so the block ends
        # SERVER_LATE early and the rest is slept here (an item that comes meanwhile
        # waits for the batch's end: the wake marker is not watched then)
        if timeout <= SERVER_LATE:
            precise = True
        else:
            timeout -= SERVER_LATE
    return timeout, precise


def check_batch(max_size: Any, max_wait: Any, lease: float) -> tuple[int, float, float]:
    """``max_size`` (1..MAX_SIZE items), ``max_wait`` (0..MAX_WAIT seconds) and the lease
    checked; InvalidArgument names the bad one."""
    if isinstance(max_size, bool) or not isinstance(max_size, int):
        raise InvalidArgument(f"max_size must be an int in 1..{MAX_SIZE}, got {max_size!r}")
    if not 1 <= max_size <= MAX_SIZE:
        raise InvalidArgument(f"max_size must be an int in 1..{MAX_SIZE}, got {max_size!r}")
    wait = seconds("max_wait", max_wait)
    if not 0 <= wait <= MAX_WAIT:
        raise InvalidArgument(f"max_wait must be between 0 and {MAX_WAIT:g} s, got {max_wait!r}")
    lease_ms(lease)
    return max_size, wait, lease


def settle_rows(jobs: Sequence[Leased], outcomes: Sequence[Settle]) -> list[Row]:
    """The settle rows of ``jobs`` ending as ``outcomes`` (one each), checked: a reason
    is stored as requeue's (``reason_json``, with the attempt), a retry without a delay
    comes back at once."""
    if len(outcomes) != len(jobs):
        raise InvalidArgument("settle takes one outcome per job")
    rows: list[Row] = []
    for job, o in zip(jobs, outcomes, strict=True):
        if not isinstance(o, Settle):
            raise InvalidArgument(f"an outcome must be a durq.Settle, got {type(o).__name__}")
        attempt = getattr(job, "attempt", None)
        reason = b""
        if o.kind in ("retry", "dead"):
            reason = reason_json(o.reason, **({} if attempt is None else {"attempt": attempt}))
        scope_code = "q" if o.scope == "queue" else "g"
        code = scope_code if o.kind == "rate_limited" else _CODES[o.kind]
        rows.append((job, code, o.delay or 0.0, reason, o.result or b""))
    return rows


def settle_chunks(rows: Sequence[Row], max_bytes: int = MAX_CALL_BYTES) -> list[Sequence[Row]]:
    """``rows`` in the calls of settle.lua that take them, in order: a done item costs
    what release.lua's does, any other what requeue.lua's does, so a call takes up to
    CHUNK["release"] done items, CHUNK["settle"] others, or a mix in proportion (a
    batch of 100 done items is one call); and at most ``max_bytes`` of the items' long
    values (reasons, results: an item larger than that goes alone)."""
    others, done = chunk_of("settle"), chunk_of("release")  # items per call of each
    budget = others * done  # a done item costs `others` of it, any other `done`
    chunks: list[Sequence[Row]] = []
    start = used = weight = 0
    for i, row in enumerate(rows):
        cost = others if row[1] == "d" else done
        size = len(row[3]) + len(row[4])  # the reason and the result
        if i > start and (used + cost > budget or weight + size > max_bytes):
            chunks.append(rows[start:i])
            start, used, weight = i, 0, 0
        used += cost
        weight += size
    if start < len(rows):
        chunks.append(rows[start:])
    return chunks


def settle(
    keys: QueueKeys,
    rows: Sequence[Row],
    *,
    result_ttl: float,
    cause: str = "",
) -> Op[list[Status]]:
    """End a batch's items (settle.lua), one status per row; ``cause`` ('size' or
    'wait'; '' for none) records the batch in the queue's history. Items of a larger
    batch than a call takes go in several calls of one round trip; the first carries the
    record."""
    ttl = _settle_ttl(result_ttl, cause)
    pauses_queue = any(code == "q" and delay > 0 for _, code, delay, _, _ in rows)
    others = _other_shards(keys.name, keys.namespace, keys.shard_count) if pauses_queue else ()
    calls: list[ScriptCall | Command] = []
    for chunk in settle_chunks(rows):
        record = len(rows) if not calls and cause else 0
        # every item done without a result (the common batch): ids and tokens only
        all_done = all(code == "d" and not result for _, code, _, _, result in chunk)
        rest: list[Arg] = []
        if not all_done:
            rest += [code for _, code, *_ in chunk]
            rest += [delay_ms(delay) if delay else 0 for _, _, delay, _, _ in chunk]
            rest += [reason for *_, reason, _ in chunk]
            rest += [result for *_, result in chunk]
        jobs = [job for job, *_ in chunk]
        calls.append(_settle_call(keys, ttl, record, cause, others, jobs, rest))
    if not calls:
        return []
    replies = yield from send_all(calls)
    return statuses([s for reply in replies for s in reply])


def settle_done(
    keys: QueueKeys, jobs: Sequence[Leased], *, result_ttl: float, cause: str = ""
) -> Op[list[Status]]:
    """``settle`` of ``jobs`` that are all done without a result (a batch whose function
    returned, its results not kept): the same calls, made without a row per item."""
    ttl = _settle_ttl(result_ttl, cause)
    size = chunk_of("release")  # as settle_chunks cuts rows of done items
    calls: list[ScriptCall | Command] = [
        _settle_call(keys, ttl, len(jobs) if not start and cause else 0, cause, (),
                     jobs[start : start + size], ())
        for start in range(0, len(jobs), size)
    ]  # fmt: skip
    if not calls:
        return []
    replies = yield from send_all(calls)
    return statuses([s for reply in replies for s in reply])


def _settle_ttl(result_ttl: float, cause: str) -> int:
    """The results' TTL in ms, ``cause`` checked."""
    if cause not in ("", "size", "wait"):
        raise InvalidArgument(f"cause must be 'size', 'wait' or '', got {cause!r}")
    return delay_ms(result_ttl, "result_ttl")


def _settle_call(
    keys: QueueKeys,
    ttl: int,
    record: int,
    cause: str,
    others: Sequence[str],
    jobs: Sequence[Leased],
    rest: Sequence[Arg],
) -> ScriptCall:
    """One call of settle.lua for ``jobs`` (``record``: the batch's size in the history,
    0 for none); ``rest``: their outcomes, delays, reasons and results, or nothing when
    every one is done without a result."""
    args: list[Arg] = [ttl, record, cause if record else "", len(others), *others]
    args.append(len(jobs) if rest else -len(jobs))
    args += [job.id for job in jobs]
    args += [job.token for job in jobs]
    args += rest
    return script_call("settle", keys, args)


def history(keys: QueueKeys) -> Op[list[BatchRecord]]:
    """The queue's recent batches, newest first (HISTORY at most; settle.lua)."""
    raw = yield Command(("LRANGE", keys.prefix + "batches", 0, HISTORY - 1))
    out: list[BatchRecord] = []
    for entry in raw or ():
        try:
            at, size, cause = text(entry).split(":", 2)
            out.append(BatchRecord(int(at) / 1000, int(size), cause))
        except ValueError:
            continue  # not durq's: skipped
    return out
