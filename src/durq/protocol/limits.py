"""Flow-control operations as IO-free generators: store limits, give back rate-limited
jobs, read the limits' state (scripts configure, rate_limited, limits_info; the limiter
itself runs inside dequeue, see src/durq/lua/lib/limits/gate.lua)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from durq import lua
from durq.errors import InvalidArgument
from durq.keys import QueueKeys, check_group, shard_name, split_shard, vector_of
from durq.limits import FlowInfo, ParkedGroup, Rate
from durq.protocol.calls import MAX_BATCH, Arg, Command, Op, ScriptCall, batched, script_call
from durq.protocol.lifecycle import Leased
from durq.protocol.status import Status

__all__ = [
    "FLOW_DEFAULTS",
    "FLOW_KEY_TYPES",
    "PAUSE_ENTRY",
    "FlowSetting",
    "check",
    "configure",
    "flow_info",
    "pause_call",
    "rate_limited",
]

FLOW_DEFAULTS: dict[str, str | int] = {"rate": "", "group_rate": "", "max_active": 0}
"""The flow settings' defaults, as stored values ("" is no rate, 0 no cap);
src/durq/lua/lib/limits/conf.lua holds the same (tests/lua/test_limits_agreement.py)."""

FLOW_KEY_TYPES: dict[str, str] = {
    "flow": "hash", "grate": "hash", "gtat": "hash", "park": "zset", "alarm": "string",
}  # fmt: skip
"""The Redis type of each flow-control key (``<prefix><part>``), as lib/limits/conf.lua's
FLOW_KEY_TYPES."""

FlowSetting = Rate | int | None
"""A flow setting's new value: a Rate (rate, group_rate), an int (max_active), or None
to remove it."""


def _rate(name: str, value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, Rate):
        raise InvalidArgument(f"{name} must be a durq.Rate or None, got {value!r}")
    return value.spec()


def configure_args(
    settings: Mapping[str, FlowSetting], group_rates: Mapping[str, Rate | None] | None = None
) -> list[Arg]:
    """The (scope, name, value) triples of configure.lua for flow settings."""
    args: list[Arg] = []
    for name, value in settings.items():
        if name not in FLOW_DEFAULTS:
            raise InvalidArgument(f"unknown flow setting {name!r}: {sorted(FLOW_DEFAULTS)}")
        if name == "max_active":
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise InvalidArgument(f"max_active must be an int >= 1 or None, got {value!r}")
            args += ["flow", name, "" if value is None else value]
        else:
            args += ["flow", name, _rate(name, value)]
    for group, rate in (group_rates or {}).items():
        args += ["grate", check_group(group), _rate(f"group_rates[{group!r}]", rate)]
    return args


def configure(
    keys: QueueKeys,
    settings: Mapping[str, FlowSetting],
    group_rates: Mapping[str, Rate | None] | None = None,
) -> Op[None]:
    """Store flow settings (``rate``, ``group_rate``, ``max_active``; None removes one)
    and per-group rates (None removes one). Checked at once, before anything is sent."""
    return _store(keys, configure_args(settings, group_rates))


def _store(keys: QueueKeys, args: list[Arg]) -> Op[None]:
    if args:
        yield script_call("configure", keys, args)


def rate_limited(
    keys: QueueKeys, items: Sequence[tuple[Leased, float, Literal["group", "queue"]]]
) -> Op[list[Status]]:
    """Give back jobs whose task raised RateLimited: ``(job, pause seconds, scope)``.
    No attempt is counted; the scope pauses for every worker, a pause of a sharded
    queue in every shard (through the outbox of ``keys``'s shard: ``pause_call``)."""
    rows = []
    pauses_queue = False
    for job, pause, scope in items:
        if scope not in ("group", "queue"):
            raise InvalidArgument(f"scope must be 'group' or 'queue', got {scope!r}")
        if not 0 <= pause <= 366 * 86400:
            raise InvalidArgument(f"pause must be between 0 s and a year, got {pause!r}")
        rows.append((job.id, job.token, scope, round(pause * 1000)))
        pauses_queue = pauses_queue or (scope == "queue" and pause > 0)
    others = _other_shards(keys.name, keys.namespace, keys.shard_count) if pauses_queue else ()
    replies = yield from batched("rate_limited", keys, (len(others), *others), rows)
    return [Status(s) for reply in replies for s in reply]


def _other_shards(name: str, namespace: str, shards: int) -> tuple[str, ...]:
    """The prefixes of the other shards of shard ``name`` (none for a plain queue)."""
    if not shards:
        return ()
    base, index = split_shard(name)
    every = _shard_prefixes(base, namespace, shards)
    return every[:index] + every[index + 1 :] if index is not None else every


@functools.lru_cache(maxsize=32)
def _shard_prefixes(base: str, namespace: str, shards: int) -> tuple[str, ...]:
    """The prefixes of every shard of sharded queue ``base``, cached per queue: a
    shard's hash tag takes a search (``durq.keys.shard_tag``)."""
    return tuple(QueueKeys(shard_name(base, i), namespace, shards).prefix for i in range(shards))


PAUSE_ENTRY = b"P\0"
"""How an outbox entry that pauses a shard starts (rate_limited.lua writes it)."""


def pause_call(entry: bytes) -> ScriptCall:
    """The script call that applies an outbox entry pausing a shard of a sharded queue
    (``PAUSE_ENTRY``) in that shard: ``limits_pause.lua``, idempotent."""
    parts = entry.split(b"\0")
    if len(parts) != 3 or parts[0] != b"P":
        raise ValueError("not a pause entry")
    return ScriptCall(lua.load("limits_pause"), vector_of(parts[1].decode()), (entry,))


def check(keys: QueueKeys) -> Op[list[str]]:
    """The queue's flow-control keys that hold another Redis type than durq's."""
    problems: list[str] = []
    for part, expected in FLOW_KEY_TYPES.items():
        key = keys.prefix + part
        found = _text((yield Command(("TYPE", key))))
        if found not in ("none", expected):
            problems.append(f"{key} is a {found}, expected a {expected}")
    return problems


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def flow_info(keys: QueueKeys, limit: int = 20) -> Op[FlowInfo]:
    """The queue's limits, current rate, pauses and parked groups (``limit`` listed)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgument(f"limit must be a positive int, got {limit!r}")
    reply = yield script_call("limits_info", keys, (min(limit, MAX_BATCH),))
    head, parked, rates = reply
    values = {_text(head[i]): head[i + 1] for i in range(0, len(head), 2)}

    def number(name: str) -> int:
        return int(values[name])

    queue_until = number("queue_until")
    max_active = number("max_active")
    return FlowInfo(
        name=keys.name,
        rate=Rate.from_spec(values["rate"]),
        group_rate=Rate.from_spec(values["group_rate"]),
        group_rates={
            _text(rates[i]): rate
            for i in range(0, len(rates), 2)
            if (rate := Rate.from_spec(rates[i + 1])) is not None
        },
        group_rates_total=number("group_rates"),
        max_active=max_active or None,
        active=number("active"),
        paused_until=queue_until / 1000 if queue_until else None,
        started=number("started"),
        rate_limited=number("rate_limited"),
        ready=number("ready"),
        waiting=number("waiting"),
        parked=number("parked"),
        parked_groups=[
            ParkedGroup(_text(parked[i]), int(parked[i + 1]) / 1000, int(parked[i + 2]))
            for i in range(0, len(parked), 3)
        ],
        server_time=number("now") / 1000,
    )
