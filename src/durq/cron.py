"""Cron expressions: the ticks of a 5-field expression in an IANA time zone.

Evaluated with cronsim (small, maintained, zoneinfo-based), with Debian cron's rules:
a time skipped by spring-forward fires once right after the jump, an ambiguous time
fires once, and day-of-month/day-of-week combine as in cron. The schedules of
``durq.app.schedule_spec`` store ticks computed here; no cron code runs in Lua.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone, tzinfo

from cronsim import CronSim, CronSimError

from durq.errors import InvalidArgument
from durq.models import ScheduleInfo

__all__ = ["CRON_TICKS", "CronTiming", "timing_of", "zone_of"]

#: how many upcoming cron ticks a schedule keeps (it asks for more once half are used)
CRON_TICKS = 64

_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_FOREVER = 2**52  # a horizon for a cron schedule that has no tick left
_COUNT_LIMIT = 5000  # past ticks counted at most when reporting how many were missed


def zone_of(tz: str | None) -> tzinfo:
    """The time zone named ``tz`` (an IANA name; None or "UTC": UTC)."""
    if tz is None or tz == "UTC":
        return timezone.utc
    if not isinstance(tz, str):
        raise InvalidArgument(f"tz must be an IANA time zone name, got {tz!r}")
    try:
        return zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise InvalidArgument(
            f"unknown time zone {tz!r} (an IANA name, e.g. Europe/Berlin)"
        ) from None


def _ms(dt: datetime) -> int:
    return int(dt.timestamp()) * 1000


class CronTiming:
    """The ticks of a 5-field cron expression in a time zone (a TickSource).

    Evaluated with cronsim: minute, hour, day of month, month, day of week, with
    Debian cron's rules for DST (skipped times fire right after the jump, ambiguous
    times fire once) and for day-of-month/day-of-week.
    """

    def __init__(
        self, expr: str, tz: str | None = None, start_ms: int = 0, end_ms: int = 0
    ) -> None:
        if not isinstance(expr, str):
            raise InvalidArgument(f"cron must be a string, got {expr!r}")
        text = " ".join(expr.split())
        text = _ALIASES.get(text.lower(), text)
        if text.startswith("@"):
            raise InvalidArgument(
                f"invalid cron expression {expr!r}: aliases are {', '.join(sorted(_ALIASES))}"
            )
        if len(text.split()) != 5:
            raise InvalidArgument(
                f"invalid cron expression {expr!r}: it needs 5 fields (minute hour "
                "day-of-month month day-of-week); for sub-minute periods use every="
            )
        self.expr = text
        self.tz_name = tz
        self.zone = zone_of(tz)
        self.start_ms = start_ms
        self.end_ms = end_ms
        try:
            first = next(self._iter(0), None)
        except (CronSimError, ValueError) as exc:
            raise InvalidArgument(f"invalid cron expression {expr!r}: {exc}") from None
        if first is None:
            raise InvalidArgument(f"cron expression {expr!r} never fires")

    def _iter(self, after_ms: int, reverse: bool = False) -> Iterator[int]:
        """Tick times (ms) after ``after_ms`` (before it when ``reverse``), strictly
        monotonic (a wall-clock time that maps to one instant twice is given once)."""
        start = datetime.fromtimestamp(after_ms / 1000, self.zone)
        if reverse:
            start += timedelta(microseconds=1)  # so a tick at after_ms itself comes first
        last: int | None = None
        try:
            for dt in CronSim(self.expr, start, reverse=reverse):
                t = _ms(dt)
                if last is not None and (t >= last if reverse else t <= last):
                    continue
                if (t > after_ms) if reverse else (t <= after_ms):
                    continue
                last = t
                yield t
        except StopIteration:  # cronsim gives up after 50 years without a match
            return

    def next_ticks(self, after_ms: int, count: int) -> list[int]:
        """The next ``count`` ticks after ``after_ms`` (ms), ignoring start and end."""
        out: list[int] = []
        for t in self._iter(after_ms):
            out.append(t)
            if len(out) >= count:
                break
        return out

    def ticks(self, after_ms: int, now_ms: int, keep_past: int) -> tuple[list[int], int, int]:
        """TickSource.ticks: past ticks (the newest ``keep_past``), then future ones."""
        low = max(after_ms, self.start_ms - 1)
        past: list[int] = []
        dropped = 0
        if low < now_ms:
            if keep_past > 0:
                for t in self._iter(now_ms, reverse=True):
                    if t <= low or len(past) >= keep_past:
                        break
                    past.append(t)
                past.reverse()
            oldest = past[0] if past else now_ms + 1
            for t in self._iter(low):
                if t >= oldest or dropped >= _COUNT_LIMIT:
                    break
                dropped += 1
            low = now_ms
        future = self.next_ticks(low, CRON_TICKS)
        if self.end_ms:
            past = [t for t in past if t <= self.end_ms]
            if not future or future[-1] >= self.end_ms:
                future = [t for t in future if t <= self.end_ms]
                return past + future, max(self.end_ms, now_ms), dropped
        horizon = future[-1] if future else _FOREVER
        return past + future, horizon, dropped


def timing_of(info: ScheduleInfo) -> CronTiming | None:
    """The tick source of a stored cron schedule (for refills), None if unreadable."""
    if info.kind != "cron" or not info.cron:
        return None
    try:
        return CronTiming(
            info.cron,
            info.tz,
            round((info.start_at or 0) * 1000),
            round((info.end_at or 0) * 1000),
        )
    except InvalidArgument:
        return None
