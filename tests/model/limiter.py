"""The reference model of flow control (docs/flow-control.md): GCRA limiters on the
server's clock, max_active, RateLimited pauses, parked groups. Plain Python, no IO.

A limiter keeps one number, its TAT; a start is allowed while ``TAT - tau <= now`` and
moves the TAT on by ``t = per / limit``. The driver only uses rates whose interval is a
whole number of ms, so the model's arithmetic is exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RateM:
    """A rate as the model sees it: interval ``t`` and tolerance ``tau`` (ms)."""

    limit: int
    per_ms: int
    burst: int = 1

    @property
    def t(self) -> float:
        return self.per_ms / self.limit

    @property
    def tau(self) -> float:
        return self.t * (self.burst - 1)


def room(tat: float | None, rate: RateM | None, now: int, want: int) -> tuple[int, float]:
    """How many of ``want`` starts the limiter allows at ``now``, and the TAT they count
    from (lib/rate_limit.lua gcra_room)."""
    base = now if tat is None or tat < now else tat
    if rate is None:
        return (0 if base > now else want), base
    n = math.floor((now + rate.tau - base) / rate.t + 1e-9) + 1
    return max(0, min(n, want)), base


def paused_tat(tat: float | None, rate: RateM | None, now: int, ms: int) -> float:
    """The TAT of a limiter paused for ``ms`` (a later TAT stands)."""
    resume = now + ms + (rate.tau if rate else 0)
    return tat if tat is not None and tat > resume else resume


@dataclass
class FlowM:
    """One queue's (or shard's) flow control."""

    rate: RateM | None = None
    group_rate: RateM | None = None
    grate: dict[str, RateM] = field(default_factory=dict)
    max_active: int = 0
    tat: float | None = None  # the queue limiter's TAT (or pause)
    gtat: dict[str, float] = field(default_factory=dict)
    parks: bool = False  # groups may be parked or paused: their TATs are looked at
    park: dict[str, int] = field(default_factory=dict)  # parked group -> allowed at
    exists: bool = False  # the flow hash exists (else dequeue skips flow control)

    @property
    def per_group(self) -> bool:
        return self.group_rate is not None or bool(self.grate) or self.parks

    @property
    def on(self) -> bool:
        return (
            self.exists
            and (self.per_group or self.rate is not None or self.max_active > 0
                 or self.tat is not None)
        )  # fmt: skip

    def rate_of(self, group: str) -> RateM | None:
        if group == "":
            return None
        return self.grate.get(group, self.group_rate)

    # -- settings ----------------------------------------------------------------------

    def configure(self, settings: dict[str, object], group_rates: dict[str, RateM | None]) -> None:
        """Store settings (None removes one): configure.lua's flow scopes."""
        if not settings and not group_rates:
            return
        self.exists = True
        for name, value in settings.items():
            if name == "max_active":
                self.max_active = int(value) if isinstance(value, int) else 0
            else:
                setattr(self, name, value)
        for group, rate in group_rates.items():
            if rate is None:
                self.grate.pop(group, None)
            else:
                self.grate[group] = rate
            self.park.pop(group, None)  # looked at again at once
        if not (self.grate or self.rate or self.group_rate or self.max_active):
            # every limit removed: pauses end, parked groups come back (unpark_all)
            self.park.clear()
            self.gtat.clear()
            self.tat = None
            self.parks = False

    # -- dequeue -----------------------------------------------------------------------

    def begin(self, now: int, active: int, want: int) -> int:
        """Unpark the groups whose time came; how many starts the queue allows now."""
        if not self.on:
            return want
        for group in [g for g, at in self.park.items() if at <= now]:
            del self.park[group]
        n = want
        if self.max_active > 0:
            n = min(n, max(self.max_active - active, 0))
        if n > 0 and (self.rate is not None or self.tat is not None):
            n, _ = room(self.tat, self.rate, now, n)
        return n

    def group_allows(self, group: str, now: int) -> bool:
        """Whether group ``group`` may start one job now (its rate, pause, parking)."""
        if not self.on or not self.per_group:
            return True
        if self.park.get(group, now) > now:
            return False
        rate = self.rate_of(group)
        tat = self.gtat.get(group)
        if rate is None and (tat is None or tat <= now):
            return True
        return room(tat, rate, now, 1)[0] > 0

    def started(self, group: str, now: int) -> None:
        """One job of ``group`` started: its group's and the queue's limiters move on."""
        if not self.on:
            return
        if self.per_group:
            rate = self.rate_of(group)
            tat = self.gtat.get(group)
            if rate is None and tat is not None and tat <= now:
                del self.gtat[group]
            elif rate is not None:
                self.gtat[group] = room(tat, rate, now, 1)[1] + rate.t
        if self.rate is not None:
            self.tat = room(self.tat, self.rate, now, 1)[1] + self.rate.t
        elif self.tat is not None:
            self.tat = None  # a pause without a rate ends with the first start after it

    def pause(self, scope: str, group: str, now: int, ms: int) -> None:
        """RateLimited(retry_after=ms, scope): the scope's TAT moves to now + ms."""
        self.exists = True
        if ms <= 0:
            return
        if scope == "queue":
            self.tat = paused_tat(self.tat, self.rate, now, ms)
        else:
            self.gtat[group] = paused_tat(self.gtat.get(group), self.rate_of(group), now, ms)
            self.parks = True
