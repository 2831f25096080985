"""Per-item status codes of the scripts, mirrored from ``lua/lib/core/status.lua``.

A test parses the Lua file and checks that both sides agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum

from durq.models import Outcome

__all__ = ["OUTCOMES", "Status", "outcomes", "statuses"]


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


# Status(code) goes through the enum machinery (docs/decisions/); the per-job
# replies of release and requeue are read in batches of hundreds, so look codes up
_BY_CODE: dict[int, Status] = {s.value: s for s in Status}


def statuses(codes: Sequence[int]) -> list[Status]:
    """``[Status(code) for code in codes]``, without the enum's call per code (an
    unknown code still raises ValueError)."""
    by_code = _BY_CODE
    try:
        return [by_code[code] for code in codes]
    except KeyError:
        return [Status(code) for code in codes]


#: the public outcome of each wire code (tests/protocol/test_status.py: every code maps)
OUTCOMES: dict[Status, Outcome] = {s: Outcome[s.name] for s in Status}


def outcomes(found: Sequence[Status]) -> list[Outcome]:
    """The public outcomes of the statuses a script returned, in order."""
    by_status = OUTCOMES
    return [by_status[s] for s in found]
