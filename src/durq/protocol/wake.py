"""A queue's wake marker, for consumers: wait on it, or set it to end their waits.

Scripts that make work available set the marker (``wake_if_needed`` in Lua); an idle
consumer blocks on it instead of polling. These are the marker's plain commands, and
``look``: what a worker reads once per heartbeat about each queue it waits on, for the
work no marker announces (a lease that another consumer took after the wait was
planned, and whose holder may die; a flow-control alarm whose holder may die; cron
schedules that want ticks; held jobs).
"""

from __future__ import annotations

from dataclasses import dataclass

from durq.keys import QueueKeys
from durq.protocol.calls import Command, Op, Pipeline, WaitCall

__all__ = ["Look", "look", "ring", "signal", "wait"]

# the keys ``look`` reads, under the queue's prefix (lua/lib/schedules/keys.lua,
# lua/lib/holding/held.lua, lua/lib/limits/park.lua)
_REFILL, _HELD, _ALARM = "srefill", "heldidx", "alarm"


def wait(keys: QueueKeys, timeout: float) -> Op[None]:
    """Block until the queue's wake marker is set, or ``timeout`` seconds pass."""
    yield WaitCall((keys.wake,), timeout)


def signal(keys: QueueKeys) -> Op[None]:
    """Set the wake marker: every consumer blocked on it wakes (and may find nothing
    and wait again)."""
    yield Command(("ZADD", keys.wake, 0, "0"))


def ring(key: str, ttl_ms: int) -> Op[None]:
    """Set one consumer's own wake marker ``key`` (``<prefix>ring:<consumer>``, see
    durq.worker.alarm), which goes away after ``ttl_ms`` if nothing pops it."""
    yield Pipeline((Command(("ZADD", key, 0, "0")), Command(("PEXPIRE", key, ttl_ms))))


@dataclass(frozen=True, slots=True)
class Look:
    """What ``look`` found, in ms from the server's clock (-1: nothing)."""

    lease_ms: int  #: until the earliest lease ends
    alarm_ms: int  #: until the flow-control alarm's time (-1 also when ``alarm_mine``)
    alarm_mine: bool  #: the alarm is held by the consumer that looked
    refill: bool  #: a cron schedule wants more ticks now (worker.schedules)
    held: bool  #: jobs are held for a worker that runs their task (worker.holding)
    refill_ms: int = -1  #: until a cron schedule wants more ticks (0 when ``refill``)
    alarm_at: int = -1  #: the alarm's time (server ms) when ``alarm_ms`` is set


def look(keys: QueueKeys, consumer: str = "", queue: bool = True) -> Op[Look]:
    """Read the earliest lease of the queue ``keys`` and the server's time; with
    ``queue`` (a queue, not an outbox) also the alarm, the cron refills due and the
    holding area. Plain reads in one round trip, O(1) each: TIME, ZRANGE, and ZRANGE,
    EXISTS, GET with ``queue``."""
    prefix = keys.prefix
    calls = [Command(("TIME",)), Command(("ZRANGE", prefix + "active", 0, 0, "WITHSCORES"))]
    if queue:
        calls += [
            Command(("ZRANGE", prefix + _REFILL, 0, 0, "WITHSCORES")),
            Command(("EXISTS", prefix + _HELD)),
            Command(("GET", prefix + _ALARM)),
        ]
    replies = yield Pipeline(tuple(calls))
    for reply in replies:
        if isinstance(reply, BaseException):  # e.g. a key of another type
            raise reply
    now = int(replies[0][0]) * 1000 + int(replies[0][1]) // 1000
    lease = replies[1]
    lease_ms = max(int(float(lease[1])) - now, 0) if lease else -1
    if not queue:
        return Look(lease_ms, -1, False, False, False)
    refill, held, alarm = replies[2], replies[3], replies[4]
    alarm_ms, mine, alarm_at = -1, False, -1
    if alarm:
        at, _, who = (alarm.decode() if isinstance(alarm, bytes) else alarm).partition("|")
        mine = who == consumer
        if at.isdigit() and not mine:
            alarm_at = int(at)
            alarm_ms = max(alarm_at - now, 0)
    refill_ms = max(int(float(refill[1])) - now, 0) if refill else -1
    return Look(lease_ms, alarm_ms, mine, refill_ms == 0, bool(held), refill_ms, alarm_at)
