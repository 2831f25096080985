"""Per-item status codes of the scripts, mirrored from ``lua/lib/status.lua``.

A test parses the Lua file and checks that both sides agree.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["Status"]


class Status(IntEnum):
    """A per-item outcome returned by a script."""

    OK = 0
    CREATED = 1
    EXISTS = 2
    DEDUPLICATED = 3
    REPLACED = 4
    RETRYING = 5
    DEAD = 6
    CANCELLED = 7
    CANCELLING = 8
    FINISHED = 9
    UPDATED = 10
    LEASE_LOST = -1
    NOT_FOUND = -2
    CORRUPT = -3
    NOT_DEAD = -4
