"""Worker logs: one JSON object per line with the job's id, task, queue and attempt, each
line naming the job, its task and its queue, and never a payload or a credential."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Iterator

import pytest

from dashboard.apps import build
from dashboard.support import running_worker
from durq.dev.server import RedisServer
from durq.logs import JsonFormatter
from helpers import eventually

PASSWORD = "pw-that-must-not-leak"
SECRET = "4111-1111-1111-1111"


@pytest.fixture
def json_logs() -> Iterator[io.StringIO]:
    """durq's log records at DEBUG, formatted by the CLI's JSON formatter."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("durq")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield stream
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_worker_logs_are_json_with_job_fields_and_no_payload_or_password(
    make_server: Callable[..., RedisServer], json_logs: io.StringIO
) -> None:
    server = make_server(password=PASSWORD)
    app = build(server.url)
    try:
        done = app.tasks["echo"].options(queue="payments").enqueue(SECRET)
        failed = app.tasks["charge"].options(queue="payments").enqueue(card_number=SECRET)
        with running_worker(app, queues=["payments"]):
            assert done.result(timeout=10) == SECRET
            eventually(lambda: app.queue("payments").stats().dead == 1, what="the dead letter")
    finally:
        app.close()

    text = json_logs.getvalue()
    assert text
    assert SECRET not in text
    assert PASSWORD not in text
    records = [json.loads(line) for line in text.splitlines()]
    for record in records:
        assert {"time", "level", "logger", "message"} <= record.keys()

    def of(job_id: str, outcome: str) -> list[dict[str, object]]:
        return [r for r in records if r.get("job_id") == job_id and r.get("outcome") == outcome]

    (ok,) = of(done.id, "done")
    assert ok == {**ok, "task": "echo", "queue": "payments", "attempt": 1, "level": "debug"}
    (retry,) = of(failed.id, "retry")
    assert retry == {**retry, "task": "charge", "queue": "payments", "attempt": 1}
    assert retry["level"] == "warning"
    assert "card declined" in str(retry["message"])
    (dead,) = of(failed.id, "dead")
    assert dead == {**dead, "task": "charge", "queue": "payments", "attempt": 2}
    assert dead["level"] == "error"

    # every line about a job names it, its task and its queue: start, success, retry, dead
    (start,) = [r for r in records if r.get("job_id") == done.id and "started" in str(r["message"])]
    for record, task in ((start, "echo"), (ok, "echo"), (retry, "charge"), (dead, "charge")):
        assert str(record["message"]).startswith(f"job {record['job_id']} ({task}) of payments ")
