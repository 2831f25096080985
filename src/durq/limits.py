"""Flow control: rate limits and a cap on jobs in flight, shared by every worker of a
queue, and the exception a task raises when an upstream says "slow down".

A :class:`Rate` is set with ``Queue.configure(rate=..., group_rate=..., group_rates=...,
max_active=...)``; the Lua scripts enforce it on the Redis server's clock (GCRA, see
docs/flow-control.md). This module holds only data: no IO.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from durq.errors import InvalidArgument

__all__ = ["FlowInfo", "ParkedGroup", "Rate"]

MAX_PER = 366 * 86400.0
"""The longest period of a rate: a year (in seconds)."""
MAX_LIMIT = 1_000_000
MAX_BURST = 1_000_000

_UNITS = {"ms": 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_TEXT = re.compile(
    r"^\s*(\d+)\s*/\s*(\d+(?:\.\d*)?|\.\d+)?\s*([a-z]+)\s*(?:,\s*burst\s*=\s*(\d+)\s*)?$"
)


def _whole(name: str, value: Any, top: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
        raise InvalidArgument(f"{name} must be an int in 1..{top}, got {value!r}")
    return value


@dataclass(frozen=True)
class Rate:
    """At most ``limit`` job starts per ``per`` seconds, shared by every worker.

    Args:
        limit: starts allowed per period (an int >= 1).
        per: the period in seconds (default 1; at least 1 ms, at most a year; kept to
            the ms).
        burst: how many jobs may start at the same moment after a quiet spell (default
            1: starts evenly spaced, one every ``per / limit`` seconds, so that no window
            of ``per`` seconds holds more than ``limit``). With a burst of b a window
            holds at most ``limit + b - 1``; the long-run rate stays ``limit / per``.
    """

    limit: int
    per: float = 1.0
    burst: int = 1

    def __post_init__(self) -> None:
        _whole("limit", self.limit, MAX_LIMIT)
        per = self.per
        if isinstance(per, bool) or not isinstance(per, (int, float)) or not math.isfinite(per):
            raise InvalidArgument(f"per must be a number of seconds, got {per!r}")
        if not 0.001 <= per <= MAX_PER:
            raise InvalidArgument(f"per must be between 0.001 and {MAX_PER:.0f} s, got {per!r}")
        _whole("burst", self.burst, MAX_BURST)

    @property
    def per_ms(self) -> int:
        """The period in whole milliseconds, as the server counts it."""
        return max(1, round(self.per * 1000))

    @property
    def interval(self) -> float:
        """Seconds between two evenly spaced starts: ``per / limit``."""
        return self.per_ms / 1000 / self.limit

    @property
    def per_second(self) -> float:
        """The long-run rate in starts per second."""
        return self.limit * 1000 / self.per_ms

    def spec(self) -> str:
        """The form the scripts store: ``limit:per_ms:burst``."""
        return f"{self.limit}:{self.per_ms}:{self.burst}"

    @classmethod
    def from_spec(cls, spec: str | bytes) -> Rate | None:
        """The Rate of a stored spec; None for ``""`` (no rate)."""
        text = spec.decode() if isinstance(spec, bytes) else spec
        if not text:
            return None
        limit, per_ms, burst = (int(part) for part in text.split(":"))
        return cls(limit, per=per_ms / 1000, burst=burst)

    @classmethod
    def parse(cls, text: str) -> Rate:
        """A Rate from its text form: ``100/s``, ``5/2.5s``, ``30/min``, ``1000/h``,
        ``100/s,burst=10`` (units ms, s, m or min, h, d)."""
        found = _TEXT.match(text.lower()) if isinstance(text, str) else None
        if not found or found.group(3) not in _UNITS:
            raise InvalidArgument(
                f"rate {text!r}: write LIMIT/PERIOD, e.g. 100/s, 5/2.5s, 30/min or 100/s,burst=10"
            )
        count, amount, unit, burst = found.groups()
        per = float(amount or 1) * _UNITS[unit]
        return cls(int(count), per=per, burst=int(burst or 1))

    def __str__(self) -> str:
        per = self.per_ms / 1000
        period = "s" if per == 1 else f"{per:g}s"
        text = f"{self.limit}/{period}"
        return text if self.burst == 1 else f"{text},burst={self.burst}"

    def split(self, shards: int) -> Rate:
        """This rate shared by ``shards`` queues: each gets ``limit`` per ``shards *
        per`` seconds (together: this rate) and a share of the burst."""
        if shards == 1:
            return self
        return Rate(self.limit, per=self.per_ms * shards / 1000, burst=-(-self.burst // shards))


@dataclass(frozen=True)
class ParkedGroup:
    """A group waiting for its rate limit (or a pause): it starts again at ``until``
    (server time, seconds) and has ``ready`` jobs waiting."""

    name: str
    until: float
    ready: int


@dataclass(frozen=True)
class FlowInfo:
    """The flow-control state of one queue (``Queue.limits()``).

    ``started`` counts the jobs started in the last full second while flow control is
    on (the current rate); ``waiting`` the ready jobs a limit holds back (all ready jobs
    while the queue's own rate, pause or ``max_active`` holds, else those of the parked
    groups listed); ``paused_until`` is when the queue's own rate or pause lets the next
    job start (None: now). Times are server time, in seconds.
    """

    name: str
    rate: Rate | None
    group_rate: Rate | None
    group_rates: dict[str, Rate]
    group_rates_total: int
    max_active: int | None
    active: int
    paused_until: float | None
    started: int
    rate_limited: int
    ready: int
    waiting: int
    parked: int
    parked_groups: list[ParkedGroup] = field(default_factory=list)
    server_time: float = 0.0

    @property
    def limited(self) -> bool:
        """True when any limit is set or anything is parked or paused."""
        return bool(
            self.rate
            or self.group_rate
            or self.group_rates_total
            or self.max_active
            or self.parked
            or self.paused_until
        )


def shard_settings(settings: dict[str, Any], shards: int, index: int) -> dict[str, Any]:
    """``Queue.configure`` settings for shard ``index`` of ``shards``: the queue-wide
    ``rate`` and ``max_active`` are shared out (the shards' sum is the queue's); group
    rates apply whole, as a group lives in one shard."""
    out = dict(settings)
    rate = settings.get("rate", ...)
    if isinstance(rate, Rate):
        out["rate"] = rate.split(shards)
    cap = settings.get("max_active", ...)
    if isinstance(cap, int) and not isinstance(cap, bool):
        if cap < shards:
            raise InvalidArgument(
                f"max_active={cap} cannot be shared by {shards} shards: give at least "
                "one job per shard"
            )
        out["max_active"] = cap // shards + (1 if index < cap % shards else 0)
    return out


def merge_flow(name: str, infos: list[FlowInfo]) -> FlowInfo:
    """The flow state of a sharded queue from its shards': counts added up, the rate
    and max_active as the whole queue's (see ``shard_settings``)."""
    n = len(infos)
    first = infos[0]

    def whole(rate: Rate | None) -> Rate | None:
        if rate is None or n == 1:
            return rate
        return Rate(rate.limit, per=max(rate.per_ms / n, 1) / 1000, burst=rate.burst * n)

    paused = [i.paused_until for i in infos if i.paused_until]
    return FlowInfo(
        name=name,
        rate=whole(first.rate),
        group_rate=first.group_rate,
        group_rates={g: r for i in infos for g, r in i.group_rates.items()},
        group_rates_total=first.group_rates_total,
        max_active=sum(i.max_active or 0 for i in infos) or None,
        active=sum(i.active for i in infos),
        paused_until=min(paused) if paused else None,
        started=sum(i.started for i in infos),
        rate_limited=sum(i.rate_limited for i in infos),
        ready=sum(i.ready for i in infos),
        waiting=sum(i.waiting for i in infos),
        parked=sum(i.parked for i in infos),
        parked_groups=sorted((p for i in infos for p in i.parked_groups), key=lambda p: p.until),
        server_time=max(i.server_time for i in infos),
    )
