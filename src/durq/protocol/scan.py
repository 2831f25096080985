"""Reading every job record of a queue, a page at a time (``durq deploy check``): HSCAN
of the jobs hash, so a job present from the first page to the last is seen at least
once, and the server's work per page is bounded by the page."""

from __future__ import annotations

from durq.errors import InvalidArgument
from durq.keys import QueueKeys
from durq.models import JobInfo
from durq.protocol.admin import job_info
from durq.protocol.calls import Command, Op, text

__all__ = ["MAX_PAGE", "scan_jobs"]

#: records read per page at most
MAX_PAGE = 1000


def scan_jobs(keys: QueueKeys, cursor: int, count: int) -> Op[tuple[int, list[JobInfo]]]:
    """One page of the queue's job records, in no order: the next cursor (0 when the
    scan is over) and the jobs (their records only: no reason, no scores)."""
    if not isinstance(cursor, int) or cursor < 0:
        raise InvalidArgument("cursor must be an int >= 0")
    if not isinstance(count, int) or not 1 <= count <= MAX_PAGE:
        raise InvalidArgument(f"count must be an int in 1..{MAX_PAGE}")
    nxt, flat = yield Command(("HSCAN", keys.prefix + "jobs", cursor, "COUNT", count))
    jobs = [job_info(text(flat[i]), flat[i + 1], None) for i in range(0, len(flat), 2)]
    return int(nxt), jobs
