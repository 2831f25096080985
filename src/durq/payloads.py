"""The job message of a task call, and the stored form of a task's result.

A task job's payload is ``[name, args, kwargs]``, plus a metadata object when there is
one (e.g. a trace context): ``[name, args, kwargs, meta]``, encoded by the queue's
serializer. A topic event names its topic instead of a task: ``"@<topic>"``, and runs
the subscriber task of the queue it was published to.

A result kept for ``JobHandle.result`` is ``{"ok": true, "value": ...}`` for a return
value and ``{"ok": false, "error": {...}}`` for a dead-lettered job, in JSON whatever
the queue's serializer.

Producers (tasks, topics), the worker (executor), tracing and the dashboard all read and
write this format, so it lives here, below all of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from durq.codec import check_json
from durq.models import JobInfo, JobState

__all__ = [
    "TOPIC_MARK",
    "build_call",
    "decode_result",
    "encode_error",
    "encode_result",
    "finished_record",
    "parse_call",
    "result_summary",
    "task_name_of",
]

TOPIC_MARK = "@"
"""The first character of a topic event's name: ``"@<topic>"``."""


def build_call(
    name: str, args: list[Any], kwargs: dict[str, Any], meta: Mapping[str, Any] | None = None
) -> list[Any]:
    """The payload of a call of task (or topic event) ``name``; ``meta`` is left out
    when empty."""
    payload: list[Any] = [name, args, kwargs]
    if meta:
        payload.append(dict(meta))
    return payload


def parse_call(payload: Any) -> tuple[str, list[Any], dict[str, Any], dict[str, Any]]:
    """Split a task job's payload into name, args, kwargs and metadata; ValueError when
    it does not have the task payload's shape."""
    if (
        isinstance(payload, list)
        and 3 <= len(payload) <= 4
        and isinstance(payload[0], str)
        and isinstance(payload[1], list)
        and isinstance(payload[2], dict)
        and (len(payload) == 3 or isinstance(payload[3], dict))
    ):
        meta = payload[3] if len(payload) == 4 else {}
        return payload[0], payload[1], payload[2], meta
    raise ValueError("the payload is not a durq task call [name, args, kwargs]")


def task_name_of(name: str, queue: str) -> str:
    """The task that runs a call named ``name`` taken from ``queue``: the task of that
    name, or for a topic event the subscriber task, named as its queue."""
    return queue if name.startswith(TOPIC_MARK) else name


def encode_result(value: Any) -> bytes:
    """A task's return value as stored for ``JobHandle.result``."""
    check_json(value, "the task's return value")
    return orjson.dumps({"ok": True, "value": value})


def encode_error(error: Mapping[str, Any]) -> bytes:
    """A dead-lettered job's error as stored for ``JobHandle.result``."""
    return orjson.dumps({"ok": False, "error": dict(error)}, default=str)


def result_summary(raw: bytes) -> dict[str, Any] | None:
    """What a stored result keeps of its job (``durq.worker.summary``: task, arguments,
    attempt, times, worker), or None (a result stored without one)."""
    try:
        summary = orjson.loads(raw).get("job")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return summary if isinstance(summary, dict) else None


def finished_record(job_id: str, raw: bytes) -> JobInfo:
    """The record of a finished job whose record is gone, from its stored result
    ``raw`` and the summary kept with it (completed, or dead for a stored error; a
    result stored without a summary gives a bare record)."""
    ok, _ = decode_result(raw)
    job = result_summary(raw) or {}

    def number(name: str) -> Any:
        value = job.get(name)
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None

    return JobInfo(
        job_id,
        JobState.COMPLETED if ok else JobState.DEAD,
        attempts=number("attempt") or 0,
        max_attempts=number("max_attempts") or 0,
        deliveries=number("deliveries") or 0,
        enqueued_at=number("enqueued"),
    )


def decode_result(raw: bytes) -> tuple[bool, Any]:
    """A stored result: ``(True, value)``, or ``(False, error)`` for a dead-lettered
    job (the error's fields, a dict)."""
    data = orjson.loads(raw)
    if data.get("ok"):
        return True, data.get("value")
    return False, data.get("error") or {}
