"""What a finished job's stored result keeps of the job (its ``"job"`` field): the task,
its arguments (those of a small payload), the attempt, when it was enqueued and started
(the server's clock), how long it ran and which worker ran it. A worker completes a job
by deleting its record, so the result (kept ``result_ttl``) is what ``durq job show``
and the dashboard's job page read once the record is gone. It rides in the result the
acknowledgement already carries: no command and no round trip of its own, and only for
tasks that keep a result (``result=True``)."""

from __future__ import annotations

from typing import Any

import orjson

from durq.models import Job
from durq.worker.executor import Call, Outcome

__all__ = ["MAX_ARGS_BYTES", "add_summary"]

#: arguments are kept when the job's stored payload is at most this long; a longer one
#: keeps only its size (a summary must stay small beside the result)
MAX_ARGS_BYTES = 1024


def add_summary(
    outcome: Outcome,
    job: Job,
    name: str,
    call: Call | Outcome,
    seconds: float,
    worker: str,
    lease: float,
) -> None:
    """Add the summary of ``job`` (of task ``name``, run as ``call``, for ``seconds``,
    by ``worker``, under a lease of ``lease`` seconds) to ``outcome``'s stored result
    or error. An outcome with a result is made for its job alone: changed in place,
    without a copy per job. None for a workflow step (its result goes to its workflow)
    or a result not written by ``durq.payloads``."""
    result = outcome.result
    if result is None or not result.endswith(b"}") or isinstance(call, Outcome):
        return
    if "wf" in call[3]:
        return
    summary: dict[str, Any] = {
        "task": name,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "deliveries": job.deliveries,
        "enqueued": job.enqueued_at,
        # the lease began when the job was handed out: the server's clock, as the rest
        "started": job.lease_deadline - lease,
        "seconds": round(seconds, 6),
        "worker": worker,
    }
    size = len(job.data)
    if size <= MAX_ARGS_BYTES:
        summary["args"], summary["kwargs"] = call[1], call[2]
    else:
        summary["args_bytes"] = size
    try:
        encoded = orjson.dumps(summary)
    except TypeError:  # arguments of another codec that JSON cannot show: their size
        summary.pop("args"), summary.pop("kwargs")
        summary["args_bytes"] = size
        encoded = orjson.dumps(summary)
    outcome.result = result[:-1] + b',"job":' + encoded + b"}"
