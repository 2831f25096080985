"""No credentials in reprs, log lines or exception messages."""

from __future__ import annotations

import asyncio
import logging

import pytest

import durq
from durq.connection import redact
from durq.dev.server import RedisServer
from durq.worker import Worker, WorkerConfig


def test_redact_hides_the_password_and_keeps_the_rest() -> None:
    assert redact("redis://user:s3cret@host:6380/2") == "redis://user:***@host:6380/2"
    assert redact("redis://host:6379/0") == "redis://host:6379/0"


def test_the_app_repr_does_not_show_the_password() -> None:
    app = durq.App("redis://user:hunter2-pw@localhost:6379/0")
    assert "hunter2-pw" not in repr(app)


def test_worker_logs_carry_no_password_and_no_payload(
    server: RedisServer, queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    host_port = server.url.split("//", 1)[1].split("/", 1)[0]
    app = durq.App(f"redis://default:@{host_port}/0")

    @app.task(queue=queue_name, max_attempts=1)
    def leak(secret: str) -> None:
        raise ValueError("boom")

    leak.enqueue("payload-secret-value")
    with caplog.at_level(logging.DEBUG, logger="durq"):
        asyncio.run(Worker(app, WorkerConfig(queues=[queue_name], burst=True),
                           handle_signals=False).run())  # fmt: skip
    text = caplog.text
    assert "boom" in text
    assert "payload-secret-value" not in text
    app.close()
