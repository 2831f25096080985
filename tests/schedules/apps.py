"""The App of the schedule tests, in-process and in ``durq worker schedules.apps:app``
processes.

A worker process learns its queue, lease, schedules and shards from the environment
(``DURQ_TEST_QUEUE``, ``DURQ_TEST_LEASE``, ``DURQ_TEST_SCHEDULES``: a JSON list of
``app.schedule`` keyword arguments with a ``name``; ``DURQ_TEST_SHARDS``: the queue's
shard count, 0 or unset for a plain queue), so every worker of a test declares
the same schedules and upserts them when it starts, as a deployed app would. The task
appends one JSON line per start and finish to the execution log named in its
arguments (one ``write`` on an ``O_APPEND`` descriptor: lines survive a SIGKILL and
never interleave).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import durq


def append(log: str, line: dict[str, Any]) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


def build(url: str | None, queue: str, lease: float = 30.0, shards: int = 0) -> durq.App:
    app = durq.App(
        url, default_queue=queue, lease=lease, shards={queue: shards} if shards else None
    )

    @app.task(name="tick")
    def tick(log: str, tag: str = "", sleep: float = 0.0) -> None:
        job = durq.current_job()
        assert job is not None
        line = {"job": job.id, "tick": job.scheduled_at, "schedule": job.schedule, "tag": tag,
                "pid": os.getpid(), "attempt": job.attempt, "queue": job.queue}  # fmt: skip
        append(log, {"event": "start", "time": time.time(), **line})
        if sleep:
            time.sleep(sleep)
        append(log, {"event": "finish", "time": time.time(), **line})

    @app.task(name="add")
    def add(a: int, b: int = 0) -> int:
        return a + b

    return app


def read_log(path: str) -> list[dict[str, Any]]:
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


app = build(
    os.environ.get("DURQ_URL"),
    os.environ.get("DURQ_TEST_QUEUE", "default"),
    float(os.environ.get("DURQ_TEST_LEASE", "30")),
    int(os.environ.get("DURQ_TEST_SHARDS", "0")),
)
for _spec in json.loads(os.environ.get("DURQ_TEST_SCHEDULES", "[]")):
    app.schedule(_spec.pop("name"), "tick", **_spec)
