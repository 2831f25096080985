"""Log output for the CLI: plain text or one JSON object per line.

The library only logs through ``logging.getLogger("durq...")``; the CLI configures the
handlers. Job log records carry ``job_id``, ``task``, ``queue``, ``attempt`` and
``outcome`` as fields; payloads and credentials are never logged. A worker also sends
the records of the tasks' own loggers through its handler (``route_task_logs``), with
the running job's fields attached (``durq.context.JobLogContext``).
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import orjson

__all__ = ["JsonFormatter", "TextFormatter", "configure_logging", "route_task_logs"]

_JOB_FIELDS = ("job_id", "task", "queue", "attempt", "outcome", "worker")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message and the job fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in _JOB_FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif getattr(record, "durq_traceback", None):
            entry["exception"] = getattr(record, "durq_traceback", None)
        return orjson.dumps(entry, default=str).decode()


class TextFormatter(logging.Formatter):
    """``time level logger: message``; a record of a task's own logger ends with the
    job it was made in (``durq_job``), and a failed attempt's record with its
    traceback (``durq_traceback``)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record) + getattr(record, "durq_job", "")
        trace = getattr(record, "durq_traceback", None)
        return f"{text}\n{trace.rstrip()}" if trace and not record.exc_info else text


def configure_logging(
    level: str = "INFO", fmt: str = "text", *, context: logging.Filter | None = None
) -> logging.Handler:
    """Send durq's logs to stderr as ``text`` or ``json``; ``context`` (a filter) may add
    fields to each record. Returns the handler."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    if context is not None:
        handler.addFilter(context)
    root = logging.getLogger("durq")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
    return handler


def route_task_logs(handler: logging.Handler, level: str = "INFO") -> bool:
    """Send the records of every other logger (the tasks' own) through ``handler`` at
    ``level``, unless the application configured logging itself (the root logger has a
    handler already: its set-up wins). Returns whether it did."""
    root = logging.getLogger()
    if root.handlers:
        return False
    root.addHandler(handler)
    root.setLevel(level.upper())
    return True
