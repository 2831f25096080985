"""``durq enqueue TASK --args '[...]'``: by name onto a queue, or checked against an App."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

import durq
from cli.support import durq as run
from durq.models import JobState
from helpers import eventually
from worker import apps
from worker.support import Durq, ExecLog, running_worker


@pytest.fixture(autouse=True)
def _fresh_module_app() -> Iterator[None]:
    """``--app worker.apps:app`` in this process: drop its connections after each test."""
    yield
    apps.app.close()


def _job_id(output: str) -> str:
    found = re.search(r"job (\S+) on", output)
    assert found, output
    return found.group(1)


def test_enqueue_by_name_puts_the_call_on_the_queue_for_a_worker(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str
) -> None:
    result = run(
        "enqueue", "work", "--args", orjson.dumps([str(exec_log), "cli"]).decode(),
        "--kwargs", '{"seconds": 0}', "--queue", queue_name, "--url", redis_url,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.output.startswith("created: job ")
    job_id = _job_id(result.output)
    info = app.queue(queue_name).job(job_id)
    assert info is not None and info.state is JobState.PENDING
    assert info.payload() == ["work", [str(exec_log), "cli"], {"seconds": 0}]

    with running_worker(app):
        eventually(lambda: exec_log.keys("finish") == ["cli"], 10)
    assert exec_log.events("finish")[0]["job"] == job_id


def test_enqueue_with_app_checks_the_call_and_its_result_can_be_awaited(
    app: durq.App, queue_name: str, redis_url: str
) -> None:
    result = run(
        "enqueue", "add", "--args", "[40, 2]", "--app", "worker.apps:app",
        "-q", queue_name, "--url", redis_url,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.output.strip().endswith(f"on {queue_name}")
    handle: durq.JobHandle[Any] = durq.JobHandle(
        app, queue_name, durq.EnqueueResult(_job_id(result.output), durq.EnqueueStatus.CREATED)
    )
    with running_worker(app):
        assert handle.result(timeout=10) == 42


def test_enqueue_as_a_user_would_from_a_shell(
    app: durq.App, queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    shown = durq_cli.run(
        "enqueue", "add", "--args", "[1, 2]", "--app", "worker.apps:app", "--queue", queue_name,
        url=redis_url,
    )  # fmt: skip
    assert shown.code == 0, shown
    assert app.queue(queue_name).stats().pending == 1
    assert re.fullmatch(rf"created: job \S{{16}} on {queue_name}\n", shown.stdout)


def test_enqueue_with_a_delay_an_id_and_a_group(
    app: durq.App, queue_name: str, redis_url: str
) -> None:
    args = ("enqueue", "add", "--args", "[1, 1]", "-q", queue_name, "--url", redis_url)
    first = run(*args, "--delay", "60", "--id", "order-7", "--group", "tenant-a")
    assert first.exit_code == 0, first.output
    assert first.output.startswith("created: job order-7 ")
    again = run(*args, "--id", "order-7")
    assert again.exit_code == 0
    assert again.output.startswith("exists: job order-7 ")
    info = app.queue(queue_name).job("order-7")
    assert info is not None
    assert (info.state, info.group) == (JobState.DELAYED, "tenant-a")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--args", "[1, 2, 3]"], "add(): too many positional arguments"),
        (["--kwargs", '{"c": 1}'], "add(): "),
    ],
    ids=["too-many-args", "unexpected-kwarg"],
)
def test_enqueue_with_app_refuses_arguments_the_task_cannot_take(
    args: list[str], message: str, app: durq.App, queue_name: str, redis_url: str
) -> None:
    result = run("enqueue", "add", *args, "--app", "worker.apps:app", "-q", queue_name,
                 "--url", redis_url)  # fmt: skip
    assert result.exit_code == 1
    assert f"Error: {message}" in result.output
    assert app.queue(queue_name).stats().enqueued == 0


def test_enqueue_with_app_names_the_tasks_when_the_task_is_unknown(
    queue_name: str, redis_url: str
) -> None:
    result = run("enqueue", "nope", "--app", "worker.apps:app", "-q", queue_name,
                 "--url", redis_url)  # fmt: skip
    assert result.exit_code == 1
    assert "no task 'nope' in worker.apps:app" in result.output
    assert "'add'" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--args", "[1,"], "not JSON"),
        (["--args", '{"a": 1}'], "--args must be a JSON list"),
        (["--kwargs", "[1]"], "--kwargs a JSON object"),
        (["--app", "no_such_module:app"], "cannot import 'no_such_module'"),
        (["--app", "worker.apps:build"], "is not a durq.App"),
        (["--app", "worker.apps"], "expected MODULE:APP"),
    ],
    ids=["bad-json", "args-not-a-list", "kwargs-not-an-object", "no-module", "not-an-app",
         "no-colon"],
)  # fmt: skip
def test_enqueue_refuses_bad_input_with_a_usage_error(
    args: list[str], message: str, queue_name: str, redis_url: str
) -> None:
    result = run("enqueue", "add", "-q", queue_name, "--url", redis_url, *args)
    assert result.exit_code == 2
    assert message in result.output


def test_enqueue_by_name_needs_a_queue(redis_url: str) -> None:
    result = run("enqueue", "add", "--url", redis_url)
    assert result.exit_code == 2
    assert "give --queue, or --app" in result.output
