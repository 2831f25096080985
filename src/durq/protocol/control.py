"""Job control as IO-free operations: cancel, progress, and the enqueue fields of expiry
and of the dedup modes throttle, debounce and keep-last (see docs/job-control.md).

The scripts: ``cancel.lua``, ``progress.lua``, ``enqueue_control.lua``; what the other
scripts do for a job that uses job control is in ``lua/lib/control/job_control.lua``.
"""

from __future__ import annotations

import datetime
import math
import time
from collections.abc import Sequence
from typing import Any

import orjson

from durq.codec import check_json
from durq.errors import InvalidArgument
from durq.keys import QueueKeys, check_job_id
from durq.models import CancelResult, CancelStatus, JobState, Message, Progress
from durq.protocol.args import MAX_DELAY, delay_left_ms, delay_ms, job_ids, seconds
from durq.protocol.calls import Arg, Command, Op, chunk_of, script_call
from durq.protocol.record import STATE_NAMES
from durq.protocol.status import Status

__all__ = [
    "FLAG_CANCEL",
    "FLAG_CONTROL",
    "MAX_PROGRESS_BYTES",
    "PARKED",
    "cancel",
    "cancel_channel",
    "control_fields",
    "expiry",
    "parse_control",
    "parse_progress",
    "progress_json",
    "read_progress",
    "refuse_for_topics",
    "write_progress",
]

#: record flags, the same as in lua/lib/core/record_layout.lua
FLAG_CANCEL = 4
FLAG_CONTROL = 8
#: the due time of a keep-last follow-up that waits for the job before it
#: (lib/control/job_control.lua)
PARKED = 9007199254740991
MAX_PROGRESS_BYTES = 16 * 1024

_CANCEL_STATUS = {
    Status.CANCELLED: CancelStatus.CANCELLED,
    Status.CANCELLING: CancelStatus.CANCELLING,
    Status.FINISHED: CancelStatus.FINISHED,
    Status.NOT_FOUND: CancelStatus.NOT_FOUND,
}


# -- enqueue ------------------------------------------------------------------------


def _uses_control(m: Message) -> bool:
    return (
        m.expires is not None
        or m.ttl is not None
        or m.debounce is not None
        or m.max_wait is not None
        or bool(m.keep_last)
    )


def _positive_ms(name: str, value: Any) -> int:
    ms = delay_ms(value, name)  # a number of seconds, 0..ten years
    if ms <= 0:
        raise InvalidArgument(f"{name} must be more than 0 seconds, got {value!r}")
    return ms


def expiry(value: Any, delay: int) -> tuple[int, int]:
    """(expires_in_ms, expires_at_ms) of ``expires``: seconds from now, or a datetime
    (a naive one is local time). The job must be able to start before it expires
    (``delay``, in ms, after now). Workflow steps use it too."""
    if isinstance(value, datetime.datetime):
        at = value.timestamp()
        left = at - time.time()
        if left <= delay / 1000:
            when = "is in the past" if left <= 0 else "comes before the job's delay ends"
            raise InvalidArgument(f"expires={value.isoformat()} {when}: the job could never start")
        return 0, math.floor(at * 1000)
    secs = seconds("expires", value)
    if not 0 < secs <= MAX_DELAY:
        raise InvalidArgument(
            f"expires must be a number of seconds in (0, {MAX_DELAY:.0f}] or a datetime, "
            f"got {value!r} (an expiry in the past: the job could never start)"
        )
    ms = round(secs * 1000)
    if ms <= delay:
        raise InvalidArgument(
            f"expires={value!r} s is not after the delay ({delay / 1000} s): the job could "
            "never start"
        )
    return ms, 0


def _debounce_expiry(value: Any, max_wait: int) -> tuple[int, int]:
    """The expiry of a debounced job (as ``expiry``). Each enqueue of a burst moves the
    job's start, up to ``max_wait`` ms after the burst's first enqueue (this one): an
    expiry that the start may pass would drop the burst's newest arguments unrun, so it
    must come after the latest start, which needs a ``max_wait``."""
    if not max_wait:
        raise InvalidArgument(
            "expires with debounce needs max_wait: each enqueue of a burst moves the job's "
            "start, which could then pass the expiry and drop the burst's newest arguments "
            "unrun; give max_wait= (the latest start) shorter than expires"
        )
    expires_in, expires_at = expiry(value, 0)
    left = expires_in or expires_at - time.time() * 1000
    if left <= max_wait:
        raise InvalidArgument(
            f"expires={value!r} is not after max_wait ({max_wait / 1000} s): a burst of "
            "enqueues may move the debounced start up to max_wait after its first enqueue, "
            "past the expiry, and its newest arguments would be dropped unrun"
        )
    return expires_in, expires_at


def _mode(m: Message, key: str, delay: int, replace: bool) -> tuple[str, int, int]:
    """(mode, window_ms, max_wait_ms) of a message's dedup mode."""
    modes = [
        name
        for name, on in (
            ("ttl", m.ttl is not None),
            ("debounce", m.debounce is not None),
            ("keep_last", bool(m.keep_last)),
            ("replace", replace),
        )
        if on
    ]
    if len(modes) > 1:
        raise InvalidArgument(f"choose one dedup mode, not {' and '.join(modes)}")
    if m.max_wait is not None and m.debounce is None:
        raise InvalidArgument("max_wait bounds a debounce: give debounce= too")
    if modes and modes[0] != "replace" and not key:
        raise InvalidArgument(f"{modes[0]} needs a key: it applies to the jobs of one key")
    if m.ttl is not None:
        return "thr", _positive_ms("ttl", m.ttl), 0
    if m.debounce is not None:
        if delay:
            raise InvalidArgument("debounce sets the delay itself: give no delay with it")
        window = _positive_ms("debounce", m.debounce)
        max_wait = 0
        if m.max_wait is not None:
            max_wait = _positive_ms("max_wait", m.max_wait)
            if max_wait < window:
                raise InvalidArgument(
                    f"max_wait ({m.max_wait} s) must be at least the debounce ({m.debounce} s)"
                )
        return "deb", window, max_wait
    if m.keep_last:
        return "keep", 0, 0
    return "", 0, 0


def control_fields(
    messages: Sequence[Message], rows: Sequence[Sequence[Arg]], result_ttl: float
) -> list[tuple[Arg, ...]] | None:
    """The six job-control fields of each row of ``enqueue_control.lua`` (expires_in,
    expires_at, mode, window, max_wait, result_ttl), or None when no message of the
    batch uses job control (its jobs then take the leaner scripts). ``rows`` are the
    nine checked enqueue fields of each message (``lifecycle``)."""
    if not any(_uses_control(m) for m in messages):
        return None
    ttl = delay_ms(result_ttl, "result_ttl")
    out: list[tuple[Arg, ...]] = []
    for m, row in zip(messages, rows, strict=True):
        if not _uses_control(m):
            out.append((0, 0, "", 0, 0, 0))
            continue
        delay, key, replace = delay_left_ms(row[2]), str(row[7]), row[8] == 1
        mode, window, max_wait = _mode(m, key, delay, replace)
        if m.expires is not None and mode == "deb":
            expires_in, expires_at = _debounce_expiry(m.expires, max_wait)
        elif m.expires is not None:
            expires_in, expires_at = expiry(m.expires, delay)
        else:
            expires_in, expires_at = 0, 0
        out.append((expires_in, expires_at, mode, window, max_wait, ttl))
    return out


def refuse_for_topics(messages: Sequence[Message]) -> None:
    """Topics fan jobs out to many queues in one step: job control is per queue."""
    if any(_uses_control(m) for m in messages):
        raise InvalidArgument(
            "expires, ttl, debounce, max_wait and keep_last apply to a queue's jobs, "
            "not to a topic's events"
        )


# -- cancel -------------------------------------------------------------------------


def cancel(keys: QueueKeys, ids: str | Sequence[str], result_ttl: float) -> Op[list[CancelResult]]:
    """Cancel the jobs ``ids`` (see cancel.lua); a result per id, in order."""
    wanted = job_ids(ids)
    ttl = delay_ms(result_ttl, "result_ttl")
    out: list[CancelResult] = []
    size = chunk_of("cancel")
    for start in range(0, len(wanted), size):
        chunk = wanted[start : start + size]
        reply = yield script_call("cancel", keys, (ttl, *chunk))
        for i, job_id in enumerate(chunk):
            status, state = Status(reply[2 * i]), int(reply[2 * i + 1])
            if status is Status.CORRUPT:
                raise InvalidArgument(f"job {job_id!r} has an unreadable record: not cancelled")
            found = JobState(STATE_NAMES[state]) if state in STATE_NAMES else None
            out.append(CancelResult(job_id, _CANCEL_STATUS[status], found))
    return out


def cancel_channel(keys: QueueKeys) -> str:
    """The pub/sub channel on which cancel.lua names the running jobs whose cancel was
    asked (a hint for their workers; the flag in the record is the truth)."""
    return keys.prefix + "cancel"


# -- progress -----------------------------------------------------------------------


def progress_json(fraction: Any, info: Any = None) -> bytes:
    """The stored form of a progress report; InvalidArgument for a fraction outside
    0..1, an ``info`` that is not JSON, or a report over MAX_PROGRESS_BYTES."""
    value = seconds("fraction", fraction)  # a finite number that is not a bool
    if not 0 <= value <= 1:
        raise InvalidArgument(f"fraction must be between 0 and 1, got {fraction!r}")
    fields: dict[str, Any] = {"fraction": value}
    if info is not None:
        check_json(info, "the progress info")
        fields["info"] = info
    data = orjson.dumps(fields)
    if len(data) > MAX_PROGRESS_BYTES:
        raise InvalidArgument(f"progress info too large ({len(data)} > {MAX_PROGRESS_BYTES} bytes)")
    return data


def write_progress(keys: QueueKeys, job_id: str, token: str, data: bytes) -> Op[Status]:
    """Store a progress report (``progress_json``) of a job held under ``token``: OK,
    CANCELLED (stored; a cancel was asked), LEASE_LOST, NOT_FOUND or CORRUPT."""
    reply = yield script_call("progress", keys, (job_id, token, data))
    return Status(reply)


def parse_progress(raw: bytes | None) -> Progress | None:
    """A stored progress report, or None (absent or unreadable)."""
    if raw is None:
        return None
    try:
        data = orjson.loads(raw)
        return Progress(float(data["fraction"]), data.get("info"), data["at"] / 1000)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


def read_progress(keys: QueueKeys, job_id: str) -> Op[Progress | None]:
    """The last progress report of ``job_id`` (None: none, or the job is gone)."""
    raw = yield Command(("HGET", keys.prefix + "progress", check_job_id(job_id)))
    return parse_progress(raw)


def parse_control(raw: bytes | None) -> dict[str, Any]:
    """A job's stored job-control data: ``expires_at`` (seconds) and ``waits_for`` (a
    keep-last follow-up: the job it waits for), when set."""
    if raw is None:
        return {}
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(data, dict):
        return {}
    out: dict[str, Any] = {}
    if isinstance(data.get("e"), (int, float)):
        out["expires_at"] = data["e"] / 1000
    if isinstance(data.get("a"), str):
        out["waits_for"] = data["a"]
    return out
