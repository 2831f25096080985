"""Secrets in task data (``durq.Redact``): hidden from the errors a worker stores, its
logs, the dashboard and the CLI, while the task itself gets its arguments."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import pytest

import durq
from cli.support import durq as run
from dashboard.support import LiveServer
from durq.dashboard import create_app
from durq.dev.server import RedisServer
from durq.worker import Worker, WorkerConfig

SECRET = "S3cr3t-value-42"
PASSWORD = "hunter2-kwarg"


def test_keys_hide_values_under_names_that_contain_them_at_any_depth() -> None:
    redact = durq.Redact(keys=("iban",))
    shown = redact.value(
        {"user": "ada", "db_password": "x", "IBAN": "DE1", "nested": [{"API-Key": 1}], "n": 2}
    )
    assert shown == {"user": "ada", "db_password": "***", "IBAN": "***",
                     "nested": [{"API-Key": "***"}], "n": 2}  # fmt: skip
    assert redact.call([1, "pw"], {"token": "t"}, names=("n", "passwd")) == (
        [1, "***"],
        {"token": "***"},
    )
    assert durq.Redact(defaults=False).value({"password": "x"}) == {"password": "x"}


def test_text_loses_named_values_patterns_and_url_credentials() -> None:
    redact = durq.Redact(patterns=(r"S3cr3t[\w-]*",))
    text = (
        f"could not log in with {SECRET}; password={PASSWORD} api_key: 'k-1' "
        '{"Token": "t-1"} redis://ops:pw-9@h:1/0 rediss://h/0?password=pw-8'
    )
    shown = redact.text(text)
    for secret in (SECRET, PASSWORD, "k-1", "t-1", "pw-9", "pw-8"):
        assert secret not in shown, secret
    assert "could not log in with ***" in shown and "redis://ops:***@h:1/0" in shown
    assert redact.text(shown) == shown  # idempotent


def test_data_nested_past_the_depth_limit_is_hidden_whole_not_a_crash() -> None:
    deep: Any = SECRET
    for _ in range(5000):
        deep = [deep]
    assert SECRET not in str(durq.Redact(defaults=False).value(deep))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"keys": "password"}, "sequences"),
        ({"keys": ("",)}, "non-empty"),
        ({"patterns": ("(",)}, "bad pattern"),
        ({"patterns": ("a*",)}, "matches nothing"),
    ],
)
def test_bad_redact_options_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(durq.InvalidArgument, match=message):
        durq.Redact(**options)
    with pytest.raises(durq.InvalidArgument, match=r"durq\.Redact"):
        durq.App(redact=("password",))  # type: ignore[arg-type]


def test_secrets_in_task_data_stay_out_of_stored_errors_logs_pages_and_the_cli(
    server: RedisServer, queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    app = durq.App(server.url, redact=durq.Redact(patterns=(r"S3cr3t[\w-]*",)))
    seen: list[str] = []

    @app.task(queue=queue_name, max_attempts=2, result=True, backoff=durq.fixed(0))
    def log_in(user: str, password: str) -> None:
        seen.append(password)
        raise PermissionError(f"could not log in {user} with {SECRET} (password={password})")

    handle = log_in.enqueue("ada", password=PASSWORD)
    with caplog.at_level(logging.DEBUG, logger="durq"):
        asyncio.run(Worker(app, WorkerConfig(queues=[queue_name], burst=True),
                           handle_signals=False).run())  # fmt: skip
    assert seen == [PASSWORD, PASSWORD]  # the task gets its arguments as they are

    # the worker's logs: a retry and a dead letter, both with the message
    assert "could not log in ada with ***" in caplog.text
    _hidden(caplog.text)
    # what it stored: the dead letter's reason, the error behind JobHandle.result
    info = app.queue(queue_name).job(handle.id)
    assert info is not None and info.reason is not None
    assert "could not log in ada with ***" in info.reason["message"]
    _hidden(str(info.reason))
    with pytest.raises(durq.JobFailed) as failed:
        handle.result(timeout=5)
    _hidden(str(failed.value.error))

    # the dashboard: the payload (a keyword argument named password), the reason
    dash = LiveServer(create_app(server.url, redact=app.redact, refresh=0)).start()
    try:
        for path in (f"/queue/job?q={queue_name}&id={handle.id}", f"/queue/dead?q={queue_name}"):
            page = httpx.get(dash.url + path)
            assert page.status_code == 200 and "could not log in ada with ***" in page.text
            _hidden(page.text)
    finally:
        dash.stop()

    # the CLI: its default keys hide the password argument
    for command in (["job", "show"], ["dlq", "show"]):
        shown = run(*command, "-q", queue_name, "--url", server.url, "--", handle.id)
        assert shown.exit_code == 0, shown.output
        assert "ada" in shown.output and PASSWORD not in shown.output
    # and patterns of its own
    listed = run("dlq", "list", "-q", queue_name, "--url", server.url,
                 "--redact-pattern", "log in ada")  # fmt: skip
    assert listed.exit_code == 0, listed.output
    assert "could not *** with ***" in listed.output
    app.close()


def _hidden(text: str) -> None:
    assert SECRET not in text
    assert PASSWORD not in text


def test_errors_stored_without_redaction_are_redacted_when_shown(
    redis_url: str, queue_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # written by a worker of another app, an older durq, or by hand
    with durq.Queue(queue_name, redis_url) as queue:
        queue.enqueue({"api_key": "k-123", "iban": "DE99"})
        job = queue.dequeue()
        assert job is not None
        queue.requeue(job, dead=True, reason={"message": f"login as ada, password={PASSWORD}"})
    shown = run("dlq", "show", "-q", queue_name, "--url", redis_url, "--", job.id)
    assert shown.exit_code == 0, shown.output
    assert "password=***" in shown.output
    assert PASSWORD not in shown.output and "k-123" not in shown.output
    assert "DE99" in shown.output  # not a default key
    monkeypatch.setenv("DURQ_REDACT_KEYS", "iban")
    monkeypatch.setenv("DURQ_REDACT_PATTERNS", r"as\s\w+")
    shown = run("dlq", "show", "-q", queue_name, "--url", redis_url, "--", job.id)
    assert "DE99" not in shown.output and "login ***, password=***" in shown.output
