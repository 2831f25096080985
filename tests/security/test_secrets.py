"""No credentials in reprs, log lines or exception messages."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

import durq
from durq.dev.server import RedisServer
from durq.transport import connection
from durq.transport.connection import redact
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


# every place redis-py (and durq's Cluster and Sentinel URLs) takes a credential from
@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://ops:S3CRET@h:6380/2", "redis://ops:***@h:6380/2"),
        ("redis://:S3CRET@h/0", "redis://:***@h/0"),
        ("rediss://ops:S3CRET@h/0?ssl_ca_certs=/ca.pem", "rediss://ops:***@h/0?ssl_ca_certs=/ca.pem"),
        ("redis://h/0?password=S3CRET", "redis://h/0?password=***"),
        ("redis://h/0?username=ops&password=S3CRET&socket_timeout=3",
         "redis://h/0?username=ops&password=***&socket_timeout=3"),
        ("rediss://h/0?ssl_keyfile=/k.pem&ssl_password=S3CRET", "rediss://h/0?ssl_keyfile=/k.pem&ssl_password=***"),
        ("redis://h/0?PASSWORD=S3CRET", "redis://h/0?PASSWORD=***"),
        ("redis://h/0?pass%77ord=S3CRET", "redis://h/0?pass%77ord=***"),  # decoded by redis-py
        ("redis://h/0?password=S3CRET#x", "redis://h/0?password=***#x"),
        ("redis://h/0#password=S3CRET", "redis://h/0#password=***"),
        ("unix://:S3CRET@/run/redis.sock?db=1", "unix://:***@/run/redis.sock?db=1"),
        ("unix:///run/redis.sock?password=S3CRET", "unix:///run/redis.sock?password=***"),
        ("redis+cluster://ops:S3CRET@a:1,b:2/", "redis+cluster://ops:***@a:1,b:2/"),
        ("rediss+cluster://a:1/?password=S3CRET", "rediss+cluster://a:1/?password=***"),
        ("redis+sentinel://:S3CRET@s1:1,s2:2/svc?sentinel_password=S3CRET&sentinel_username=sn",
         "redis+sentinel://:***@s1:1,s2:2/svc?sentinel_password=***&sentinel_username=sn"),
        ("rediss+sentinel://s1:1/svc/2?password=S3CRET", "rediss+sentinel://s1:1/svc/2?password=***"),
        # a password with an unencoded / ? or # moves the host part: all before the last @ goes
        ("redis://ops:S3/CRET@h:1/0", "redis://***@h:1/0"),
        ("redis://:S3?CRET@h/0", "redis://***@h/0"),
        ("redis://:S3#CRET@h/0", "redis://***@h/0"),
        ("ops:S3CRET@h:6379", "***@h:6379"),  # no scheme
        ("memcache://ops:S3CRET@h", "memcache://ops:***@h"),  # refused, and shown so
        ("redis://h:6379/0", "redis://h:6379/0"),
        ("redis://ops@h/0", "redis://ops@h/0"),  # a user name alone is no secret
    ],
)  # fmt: skip
def test_every_credential_form_of_a_url_is_redacted(url: str, shown: str) -> None:
    assert redact(url) == shown
    assert "CRET" not in redact(url)


def test_a_password_in_the_url_query_stays_out_of_reprs_errors_and_worker_logs(
    make_server: Callable[..., RedisServer], caplog: pytest.LogCaptureFixture
) -> None:
    password = "query-pw-must-not-show"
    server = make_server(password=password)
    url = f"redis://127.0.0.1:{server.port}/0?password={password}"
    app = durq.App(url)
    assert password not in repr(app) and "password=***" in repr(app)
    assert password not in repr(connection.parse_target(url.replace("redis:", "redis+cluster:")))
    with pytest.raises(durq.InvalidArgument) as refused:  # a Sentinel URL without a service
        connection.parse_target(f"redis+sentinel://127.0.0.1:{server.port}/?password={password}")
    assert password not in str(refused.value)

    @app.task(queue="query-pw", max_attempts=1)
    def fails() -> None:
        raise ValueError("boom")

    fails.enqueue()
    with caplog.at_level(logging.DEBUG, logger="durq"):
        asyncio.run(Worker(app, WorkerConfig(queues=["query-pw"], burst=True),
                           handle_signals=False).run())  # fmt: skip
    assert "boom" in caplog.text
    assert password not in caplog.text
    app.close()
