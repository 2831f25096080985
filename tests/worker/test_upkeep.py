"""The upkeep's reading of its looks (durq.worker.upkeep), without a server: what a look
found decides what a waiter watches and when the next look comes."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

from durq.protocol.wake import Look
from durq.worker.pace import Pace
from durq.worker.upkeep import Upkeep, _soon


def _upkeep() -> Upkeep:
    holding: Any = SimpleNamespace(grace=600.0)
    schedules: Any = SimpleNamespace()
    return Upkeep([], [], [], schedules=schedules, holding=holding, pace=Pace(5.0, lambda: True))


def test_a_past_alarm_wakes_a_waiter_once_and_a_new_one_again() -> None:
    # an alarm outlives its time by more than a stretched look (lua/lib/limits/park.lua):
    # one its holder served stays until then, and must not wake the waiter at every look
    upkeep = _upkeep()
    past = Look(-1, 0, False, False, False, -1, 1_000)
    first = upkeep._past_alarm_once(0, past)
    assert first.alarm_ms == 0 and _soon(first) == [0.0]  # woken, looked at again soon
    again = upkeep._past_alarm_once(0, past)
    assert again.alarm_ms == -1 and _soon(again) == []  # the same alarm: nothing to watch
    assert upkeep._past_alarm_once(1, past).alarm_ms == 0  # another waiter's own look
    newer = dataclasses.replace(past, alarm_at=2_000)
    assert upkeep._past_alarm_once(0, newer).alarm_ms == 0  # a later alarm, past too
    ahead = dataclasses.replace(past, alarm_ms=300, alarm_at=3_000)
    assert upkeep._past_alarm_once(0, ahead) == ahead  # one still ahead is watched
