"""A queue's wake marker, for consumers: wait on it, or set it to end their waits.

Scripts that make work available set the marker (``wake_if_needed`` in Lua); an idle
consumer blocks on it instead of polling. These are the marker's two plain commands.
"""

from __future__ import annotations

from durq.keys import QueueKeys
from durq.protocol.calls import Command, Op, Pipeline, WaitCall

__all__ = ["ring", "signal", "wait"]


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
