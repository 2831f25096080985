"""Log output for the CLI: plain text or one JSON object per line.

The library only logs through ``logging.getLogger("durq...")``; the CLI configures the
handlers. Job log records carry ``job_id``, ``task``, ``queue``, ``attempt`` and
``outcome`` as fields; payloads and credentials are never logged.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import orjson

__all__ = ["JsonFormatter", "configure_logging"]

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
        return orjson.dumps(entry, default=str).decode()


def configure_logging(level: str = "INFO", fmt: str = "text") -> None:
    """Send durq's logs to stderr as ``text`` or ``json``."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger("durq")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
