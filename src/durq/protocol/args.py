"""Argument checks and encodings shared by the protocol's operations.

Bad input fails here, at the edge (an enqueue, a declaration), with InvalidArgument
naming the argument, never in a script or a worker: every value a script receives was
checked and converted (seconds to ms) by one of these.
"""

from __future__ import annotations

import binascii
import datetime
import math
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from durq.errors import InvalidArgument
from durq.keys import check_job_id

__all__ = [
    "ATTEMPT_ERROR_MESSAGE",
    "ATTEMPT_ERROR_TRACEBACK",
    "MAX_ATTEMPTS_RANGE",
    "MAX_DELAY",
    "MAX_LEASE",
    "MAX_REASON_BYTES",
    "MIN_LEASE",
    "PRIORITY_RANGE",
    "attempt_error_json",
    "delay_arg",
    "delay_left_ms",
    "delay_ms",
    "int_in",
    "job_ids",
    "lease_ms",
    "natural",
    "new_ids",
    "positive_int",
    "reason_json",
    "seconds",
]

MAX_DELAY = 10 * 365 * 86400.0
MAX_LEASE = 7 * 86400.0
MIN_LEASE = 0.05
MAX_REASON_BYTES = 64 * 1024
#: what a job's error list keeps of each failure (lib/core/attempt_errors.lua): the head of
#: its message and the tail of its traceback (where it was raised), in characters
ATTEMPT_ERROR_MESSAGE = 1024
ATTEMPT_ERROR_TRACEBACK = 4096
PRIORITY_RANGE = range(-10, 11)
MAX_ATTEMPTS_RANGE = range(1, 10001)


_ALTCHARS = bytes.maketrans(b"+/", b"._")


def new_ids(n: int) -> list[str]:
    """``n`` random job ids: 16 characters (96 random bits) each, from letters, digits,
    ``_`` and ``.`` (not ``-``, so an id never reads as an option on a command line)."""
    # base64.b64encode(..., altchars=b"._") without its Python layers (a third of the
    # cost of one id)
    if n == 1:  # a single enqueue: one id from the spares, no system call
        try:
            return [_spare.pop()]
        except IndexError:  # none left (or another thread took the last): make more
            _spare.extend(_make_ids(_SPARES))
            return [_spare.pop()]
    return _make_ids(n)


def _make_ids(n: int) -> list[str]:
    raw = binascii.b2a_base64(os.urandom(12 * n), newline=False).translate(_ALTCHARS).decode()
    return [raw[i : i + 16] for i in range(0, 16 * n, 16)]


#: ids made ahead for single enqueues: reading 12 bytes from os.urandom is a system
#: call, as long as a whole id costs otherwise. list.pop is atomic, so two threads
#: never take the same id; a forked child drops its parent's spares (it would hand
#: out the very ids its parent hands out).
_spare: list[str] = []
_SPARES = 64
os.register_at_fork(after_in_child=_spare.clear)


def seconds(name: str, value: Any) -> float:
    """``value`` as a float number of seconds (finite; not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument(f"{name} must be a number of seconds, got {value!r}")
    if not math.isfinite(value):
        raise InvalidArgument(f"{name} must be finite, got {value!r}")
    return float(value)


def delay_ms(value: Any, name: str = "delay") -> int:
    """Seconds to ms; 0 <= value <= ten years."""
    secs = seconds(name, value)
    if not 0 <= secs <= MAX_DELAY:
        raise InvalidArgument(f"{name} must be between 0 and {MAX_DELAY:.0f} s, got {value!r}")
    return round(secs * 1000)


def delay_arg(value: Any, name: str = "delay") -> int | str:
    """A job's delay as a script takes it: ms from now (``delay_ms``), or for an aware
    datetime (an eta) ``"@"`` and its epoch ms, which the script compares with the
    server's clock: a producer whose clock is skewed still delays by the right amount."""
    if not isinstance(value, datetime.datetime):
        return delay_ms(value, name)
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgument(
            f"{name}={value.isoformat()} has no time zone: give an aware datetime"
        )
    at = value.timestamp()
    if not 0 < at <= time.time() + MAX_DELAY:  # the client's clock: a sanity bound only
        raise InvalidArgument(f"{name}={value.isoformat()} is more than {MAX_DELAY:.0f} s away")
    return f"@{math.floor(at * 1000)}"


def delay_left_ms(arg: Any) -> int:
    """The ms a ``delay_arg`` leaves from now, by this client's clock (for checks that
    compare it with other options; the script measures an eta on the server's)."""
    if isinstance(arg, str):
        return max(1, int(arg[1:]) - math.floor(time.time() * 1000))
    return int(arg)


def lease_ms(value: Any) -> int:
    """Seconds to ms; MIN_LEASE <= value <= one week."""
    secs = seconds("lease", value)
    if not MIN_LEASE <= secs <= MAX_LEASE:
        raise InvalidArgument(
            f"lease must be between {MIN_LEASE} and {MAX_LEASE:.0f} s, got {value!r}"
        )
    return round(secs * 1000)


def int_in(name: str, value: Any, allowed: range) -> int:
    """``value`` if it is an int in ``allowed``."""
    if isinstance(value, bool) or not isinstance(value, int) or value not in allowed:
        raise InvalidArgument(f"{name} must be an int in {allowed.start}..{allowed.stop - 1}")
    return value


def positive_int(name: str, value: Any) -> int:
    """``value`` if it is an int >= 1."""
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


def attempt_error_json(reason: bytes) -> bytes:
    """A failure as a job's error list keeps it: a JSON object of the reason's ``reason``
    and ``type``, the head of its ``message`` and the tail of its ``traceback`` (requeue
    adds the attempt and the server's time)."""
    try:
        fields = orjson.loads(reason)
    except orjson.JSONDecodeError:
        fields = None
    if not isinstance(fields, dict):
        fields = {"message": reason.decode("utf-8", "replace")}
    entry = {k: fields[k] for k in ("reason", "type") if fields.get(k) is not None}
    if fields.get("message") is not None:
        entry["message"] = str(fields["message"])[:ATTEMPT_ERROR_MESSAGE]
    if fields.get("traceback"):
        entry["traceback"] = str(fields["traceback"])[-ATTEMPT_ERROR_TRACEBACK:]
    return orjson.dumps(entry, default=str)


def natural(name: str, value: Any) -> int:
    """``value`` if it is an int >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument(f"{name} must be an int >= 0, got {value!r}")
    return value


def job_ids(ids: str | Sequence[str]) -> list[str]:
    """One job id or several, checked, as a list."""
    return [check_job_id(ids)] if isinstance(ids, str) else [check_job_id(i) for i in ids]
