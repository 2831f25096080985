"""Cron evaluation (durq.cron.CronTiming, on cronsim): DST in America/New_York and
Europe/Berlin, catch-up planning. These are the exact functions the refills and upserts
use; the instant to evaluate from is an argument, so no clock needs faking."""

from __future__ import annotations

import itertools
from datetime import datetime
from zoneinfo import ZoneInfo

from durq.cron import CronTiming


def ms(text: str, tz: str) -> int:
    """Epoch ms of a wall-clock time in tz (fold=0: the first of an ambiguous pair)."""
    return int(datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(tz)).timestamp() * 1000)


def wall(t: int, tz: str) -> str:
    return datetime.fromtimestamp(t / 1000, ZoneInfo(tz)).strftime("%m-%d %H:%M %Z")


def days(expr: str, tz: str, start: str, n: int) -> list[str]:
    timing = CronTiming(expr, tz)
    return [wall(t, tz) for t in timing.next_ticks(ms(start, tz), n)]


def test_new_york_spring_forward_fires_a_skipped_time_once_after_the_jump() -> None:
    # 2026-03-08 02:00 EST -> 03:00 EDT: 02:30 does not exist that day
    assert days("30 2 * * *", "America/New_York", "2026-03-07 00:00", 3) == [
        "03-07 02:30 EST", "03-08 03:00 EDT", "03-09 02:30 EDT",
    ]  # fmt: skip


def test_new_york_fall_back_fires_an_ambiguous_time_once() -> None:
    # 2026-11-01 02:00 EDT -> 01:00 EST: 01:30 happens twice, fires once
    assert days("30 1 * * *", "America/New_York", "2026-10-31 00:00", 3) == [
        "10-31 01:30 EDT", "11-01 01:30 EDT", "11-02 01:30 EST",
    ]  # fmt: skip


def test_berlin_transitions() -> None:
    # 2026-03-29 02:00 CET -> 03:00 CEST, 2026-10-25 03:00 CEST -> 02:00 CET
    assert days("15 2 * * *", "Europe/Berlin", "2026-03-28 12:00", 3) == [
        "03-29 03:00 CEST", "03-30 02:15 CEST", "03-31 02:15 CEST",
    ]  # fmt: skip
    assert days("15 2 * * *", "Europe/Berlin", "2026-10-24 12:00", 3) == [
        "10-25 02:15 CEST", "10-26 02:15 CET", "10-27 02:15 CET",
    ]  # fmt: skip


def test_frequent_ticks_stay_strictly_increasing_across_transitions() -> None:
    for tz, day in (
        ("America/New_York", "2026-11-01"),
        ("Europe/Berlin", "2026-10-25"),
        ("America/New_York", "2026-03-08"),
        ("Europe/Berlin", "2026-03-29"),
    ):
        timing = CronTiming("*/15 * * * *", tz)
        ticks = timing.next_ticks(ms(f"{day} 00:00", tz), 20)
        assert all(b > a for a, b in itertools.pairwise(ticks))
        assert all(t % (15 * 60 * 1000) == 0 for t in ticks)


def test_utc_and_aliases() -> None:
    timing = CronTiming("@daily")
    start = ms("2026-05-01 10:00", "UTC")
    assert [wall(t, "UTC") for t in timing.next_ticks(start, 2)] == [
        "05-02 00:00 UTC", "05-03 00:00 UTC",
    ]  # fmt: skip


def test_ticks_plan_catch_up_and_the_horizon() -> None:
    timing = CronTiming("* * * * *")
    base = ms("2026-05-01 10:00", "UTC")
    now = base + 10 * 60_000 + 30_000  # ten whole minutes after base, and a half
    # behind by 10 ticks: keep the newest 3, report the 7 older ones as dropped
    ticks, horizon, dropped = timing.ticks(base, now, 3)
    assert ticks[:3] == [base + 8 * 60_000, base + 9 * 60_000, base + 10 * 60_000]
    assert dropped == 7
    assert len(ticks) == 3 + 64 and horizon == ticks[-1]
    assert ticks[3] == base + 11 * 60_000
    # up to date: only future ticks
    ticks, horizon, dropped = timing.ticks(now, now, 3)
    assert ticks[0] == base + 11 * 60_000 and dropped == 0
    # an end bounds the horizon
    bounded = CronTiming("* * * * *", None, 0, base + 5 * 60_000)
    ticks, horizon, _ = bounded.ticks(base, base, 0)
    assert ticks == [base + i * 60_000 for i in range(1, 6)]
    assert horizon == base + 5 * 60_000
