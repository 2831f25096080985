"""Durable steps as IO-free operations (docs/durable.md): record a step's result, park a
job in a sleep or a wait, read what a job stored, send a signal, count parked jobs.

The scripts: ``step_record.lua``, ``step_sleep.lua``, ``step_wait.lua``, ``step_list.lua``,
``signal.lua``, ``signal_deliver.lua`` (an outbox entry of another shard),
``parked_counts.lua``; what the other scripts do for a job that stored steps is in
``lua/lib/durable/steps.lua``. The records' formats are in ``lua/lib/durable/record.lua``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from durq import lua
from durq.codec import check_json
from durq.errors import InvalidArgument, PayloadTooLarge
from durq.keys import QueueKeys, check_job_id, shard_name, split_shard, vector_of
from durq.models import Parked, StoredStep
from durq.protocol.args import MAX_DELAY, seconds
from durq.protocol.calls import Arg, Op, ScriptCall, script_call
from durq.protocol.status import Status

__all__ = [
    "DEFAULT_SIGNAL_TTL",
    "FOREVER",
    "MAX_SIGNAL_BYTES",
    "MAX_STEPS",
    "SIGNAL_ENTRY",
    "Reply",
    "check_signal_name",
    "check_step_name",
    "deliver_call",
    "other_shards",
    "parked",
    "read_steps",
    "record_step",
    "signal",
    "signal_payload",
    "sleep",
    "step_body",
    "stored_step",
    "stored_steps",
    "wait",
]

#: the most records (steps, sleeps, waits) one job may store
MAX_STEPS = 10_000
#: the largest signal payload (JSON bytes): a signal is copied into every waiter's record
MAX_SIGNAL_BYTES = 64 * 1024
#: how long a signal is kept for the waits reached after it, by default (a day)
DEFAULT_SIGNAL_TTL = 86400.0
#: the due time of a wait without a timeout (lua/lib/durable/steps.lua DURABLE_FOREVER)
FOREVER = 9007199254740991
#: how an outbox entry that carries a signal to another shard starts (signal.lua)
SIGNAL_ENTRY = b"G\0"
#: records read per step_list call (a job's steps of a small hash come in one)
_PAGE = 1000
# control characters and lone surrogates, as in job ids (durq.keys)
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")


def _label(kind: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"a {kind} must be a non-empty string, got {value!r}")
    if len(value) * 4 > 200 and len(value.encode("utf-8", "surrogatepass")) > 200:
        raise InvalidArgument(f"{kind} {value[:40]!r}... is longer than 200 bytes")
    if _UNPRINTABLE.search(value):
        raise InvalidArgument(f"{kind} {value!r} contains control or surrogate characters")
    return value


def check_step_name(name: Any) -> str:
    """``name`` if it can name a step, sleep or wait: 1-200 bytes of UTF-8, no control
    characters, not beginning with ``~`` (durq's own bookkeeping)."""
    if isinstance(name, str) and name.startswith("~"):
        raise InvalidArgument(f"step name {name!r}: names beginning with '~' are durq's own")
    return _label("step name", name)


def check_signal_name(name: Any) -> str:
    """``name`` if it can name a signal: 1-200 bytes of UTF-8, no control characters."""
    return _label("signal name", name)


@dataclass(frozen=True, slots=True)
class Reply:
    """What a step script answered: ``tag`` (``ok``, ``kept``, ``parked``, ``done``,
    ``record``, ``cancelled``, ``conflict``; ``refused`` with ``status`` when the caller's
    lease is gone) and its ``value`` (a stored record, or a time in ms)."""

    tag: str
    value: Any = None
    status: Status | None = None


def _reply(raw: Any) -> Reply:
    if isinstance(raw, int):  # the fence: LEASE_LOST, NOT_FOUND, CORRUPT
        return Reply("refused", status=Status(raw))
    tag = raw[0].decode() if isinstance(raw[0], bytes) else str(raw[0])
    return Reply(tag, raw[1] if len(raw) > 1 else None)


# -- a running job's steps -------------------------------------------------------------


def step_body(value: Any, ms: int, tries: int, limit: int) -> bytes:
    """The record of a step's result without its kind and time (step_record.lua adds
    them): JSON ``{"ms":..,"n":..,"v":value}``. Raises NotSerializable for a value JSON
    cannot hold as it is, PayloadTooLarge over ``limit`` bytes."""
    check_json(value, "the step's result")
    body = orjson.dumps({"ms": ms, "n": tries, "v": value})
    if len(body) > limit:
        raise PayloadTooLarge(
            f"the step's result is {len(body)} bytes of JSON; the limit is {limit}"
        )
    return body


def record_step(keys: QueueKeys, job_id: str, token: str, name: str, body: bytes) -> Op[Reply]:
    """Store step ``name``'s result (``step_body``) with job ``job_id``, fenced by
    ``token``: ``ok``; ``kept`` with the record stored before (the first write wins);
    ``refused`` (the lease is gone: nothing stored)."""
    raw = yield script_call("step_record", keys, (job_id, token, name, body, MAX_STEPS))
    return _reply(raw)


def sleep(
    keys: QueueKeys, job_id: str, token: str, name: str, *, after: int | None = None,
    until: int | None = None,
) -> Op[Reply]:  # fmt: skip
    """Job ``job_id`` reached sleep ``name``: ``after`` ms from the first time it is
    reached, or ``until`` (epoch ms). ``parked`` (value: when it is due), ``done`` (its
    end has passed: go on), ``cancelled``, ``conflict`` or ``refused``."""
    mode, ms = ("in", after) if until is None else ("at", until)
    raw = yield script_call("step_sleep", keys, (job_id, token, name, mode, ms or 0))
    return _reply(raw)


def wait(
    keys: QueueKeys, job_id: str, token: str, name: str, signal_name: str, timeout: int | None
) -> Op[Reply]:
    """Job ``job_id`` reached wait ``name`` for ``signal_name`` (``timeout`` ms, None:
    none): ``record`` (its outcome: a signal or a timeout record), ``parked``,
    ``cancelled``, ``conflict`` or ``refused``."""
    args = (job_id, token, name, signal_name, "" if timeout is None else timeout)
    return _reply((yield script_call("step_wait", keys, args)))


def read_steps(keys: QueueKeys, job_id: str) -> Op[tuple[int, dict[str, bytes]]]:
    """The server time (ms) and every record job ``job_id`` stored, by name (durq's
    bookkeeping left out): pages of ``step_list.lua``, one round trip each."""
    cursor: Arg = "0"
    found: dict[str, bytes] = {}
    now = 0
    while True:
        reply = yield script_call("step_list", keys, (job_id, cursor, _PAGE))
        now, cursor = int(reply[0]), reply[1]
        for i in range(2, len(reply), 2):
            name = reply[i].decode("utf-8", "replace")
            if not name.startswith("~"):
                found[name] = reply[i + 1]
        if cursor in (b"0", "0", 0):
            return now, found


def _ms(value: Any) -> float | None:
    return int(value) / 1000 if value else None


def stored_step(name: str, raw: bytes, now_ms: int) -> StoredStep:
    """One stored record, read (``now_ms``: the server time it was read at)."""
    try:
        data = orjson.loads(raw)
        kind = data["k"]
    except (orjson.JSONDecodeError, TypeError, KeyError):
        return StoredStep(name, "unknown", "unreadable", value=raw[:200].decode("utf-8", "replace"))
    at = _ms(data.get("at"))
    if kind == "step":
        return StoredStep(name, "step", "done", at=at, seconds=(data.get("ms") or 0) / 1000,
                          tries=data.get("n"), value=data.get("v"))  # fmt: skip
    if kind == "sleep":
        state = "asleep" if int(data.get("u") or 0) > now_ms else "slept"
        return StoredStep(name, "sleep", state, at=at, until=_ms(data.get("u")))
    signal_name, until = data.get("s"), _ms(data.get("u"))
    if kind == "wait":
        return StoredStep(name, "wait", "waiting", at=at, until=until, signal=signal_name)
    if kind == "signal":
        return StoredStep(name, "wait", "signalled", at=at, signal=signal_name, value=data.get("v"))
    if kind == "timeout":
        return StoredStep(name, "wait", "timed out", at=at, until=until, signal=signal_name)
    return StoredStep(name, str(kind), "unknown", at=at)


def stored_steps(keys: QueueKeys, job_id: str) -> Op[list[StoredStep]]:
    """What job ``job_id`` stored, oldest first (by the time each was recorded)."""
    now, found = yield from read_steps(keys, check_job_id(job_id))
    steps = [stored_step(name, raw, now) for name, raw in found.items()]
    return sorted(steps, key=lambda s: (s.at or 0, s.name))


# -- signals --------------------------------------------------------------------------


def signal_payload(value: Any) -> bytes:
    """A signal's payload as stored: JSON, at most MAX_SIGNAL_BYTES."""
    check_json(value, "the signal's payload")
    data = orjson.dumps(value)
    if len(data) > MAX_SIGNAL_BYTES:
        raise PayloadTooLarge(
            f"the signal's payload is {len(data)} bytes of JSON; the limit is {MAX_SIGNAL_BYTES}"
        )
    return data


def signal_ttl_ms(ttl: Any) -> int:
    """How long a signal is kept, in ms: more than 0 s, at most ten years."""
    secs = seconds("ttl", ttl)
    if not 0 < secs <= MAX_DELAY:
        raise InvalidArgument(f"ttl must be more than 0 s and at most {MAX_DELAY:.0f} s")
    return max(round(secs * 1000), 1)


def other_shards(keys: QueueKeys) -> tuple[str, ...]:
    """The prefixes of the shards of ``keys``'s sharded queue other than its own (none
    for a plain queue)."""
    if not keys.shard_count:
        return ()
    base, index = split_shard(keys.name)
    return tuple(
        QueueKeys(shard_name(base, i), keys.namespace, keys.shard_count).prefix
        for i in range(keys.shard_count)
        if i != index
    )


def signal(
    keys: QueueKeys, name: str, signal_id: str, ttl_ms: int, payload: bytes,
    others: Sequence[str] = (),
) -> Op[tuple[int, float]]:  # fmt: skip
    """Send signal ``name`` to the queue (or shard) ``keys``, and through its outbox to
    the shards ``others`` (prefixes): (jobs made ready here, when it was sent)."""
    args: list[Arg] = [check_signal_name(name), signal_id, ttl_ms, payload, *others]
    reply = yield script_call("signal", keys, args)
    return int(reply[0]), int(reply[1]) / 1000


def deliver_call(entry: bytes) -> ScriptCall:
    """The script call that applies a signal's outbox entry (``SIGNAL_ENTRY``) in its
    queue's slot: ``signal_deliver.lua``, idempotent."""
    parts = entry.split(b"\0", 2)
    if len(parts) < 3 or parts[0] != b"G":
        raise ValueError("not a signal entry")
    return ScriptCall(lua.load("signal_deliver"), vector_of(parts[1].decode()), (entry,))


def parked(keys: QueueKeys) -> Op[Parked]:
    """How many jobs of the queue sleep or wait now (``parked_counts.lua``)."""
    reply = yield script_call("parked_counts", keys, ())
    return Parked(asleep=int(reply[1]), waiting=int(reply[2]))
