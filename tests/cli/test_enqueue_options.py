"""``durq enqueue`` with the per-job options of ``Task.options``: priority, replace,
expiry, throttle, debounce and keep-last; by name onto a queue, and through an App.
Bad combinations are the library's own errors, in one line."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator

import orjson
import pytest
from click.testing import Result

import durq
from cli.support import durq as run
from durq.models import JobState
from helpers import eventually
from worker import apps
from worker.support import Durq, ExecLog, running_worker

Enqueue = Callable[..., Result]


@pytest.fixture(autouse=True)
def _fresh_module_app() -> Iterator[None]:
    """``--app worker.apps:app`` in this process: drop its connections after each test."""
    yield
    apps.app.close()


@pytest.fixture(params=["by-name", "with-app"])
def enqueue(request: pytest.FixtureRequest, queue_name: str, redis_url: str) -> Enqueue:
    """``durq enqueue TASK --args JSON OPTIONS...`` onto this test's queue: by name
    (``Queue.enqueue``), or checked against ``worker.apps:app`` (``Task.options``)."""
    through_app = ["--app", "worker.apps:app"] if request.param == "with-app" else []

    def enqueue_(task: str, args: list[object], *options: str) -> Result:
        return run(
            "enqueue", task, "--args", orjson.dumps(args).decode(), *through_app,
            "-q", queue_name, "--url", redis_url, *options,
        )  # fmt: skip

    return enqueue_


@pytest.fixture
def queue(queue_name: str, redis_url: str) -> Iterator[durq.Queue]:
    with durq.Queue(queue_name, redis_url) as q:
        yield q


def _said(result: Result) -> tuple[str, str]:
    """(status, job id) of a successful ``durq enqueue``."""
    assert result.exit_code == 0, result.output
    found = re.fullmatch(r"(\w+): job (\S+) on \S+( \(superseded job \S+\))?\n", result.output)
    assert found, result.output
    return found.group(1), found.group(2)


def test_a_job_not_started_before_its_expiry_never_runs(
    enqueue: Enqueue, app: durq.App, exec_log: ExecLog, queue: durq.Queue
) -> None:
    _, late = _said(enqueue("work", [str(exec_log), "late"], "--expires", "0.2"))
    _said(enqueue("work", [str(exec_log), "kept"], "--expires", "60"))
    time.sleep(0.3)  # no worker started it in time
    with running_worker(app):
        eventually(lambda: exec_log.keys("finish") == ["kept"], 10)
    assert exec_log.count("start", "late") == 0
    info = queue.job(late)
    assert info is not None and info.state is JobState.EXPIRED
    assert queue.stats().expired == 1


def test_priority_orders_the_jobs(enqueue: Enqueue, queue: durq.Queue) -> None:
    ids = {p: _said(enqueue("add", [0, 0], "--priority", p))[1] for p in ("0", "5", "-3")}
    assert [job.id for job in queue.dequeue_many(3)] == [ids["5"], ids["0"], ids["-3"]]


def test_debounce_with_a_key_coalesces_a_burst_into_one_job_with_the_newest_arguments(
    enqueue: Enqueue, queue: durq.Queue
) -> None:
    options = ("--key", "report", "--debounce", "1", "--max-wait", "30")
    said = [_said(enqueue("add", [i, i], *options)) for i in range(3)]
    assert [status for status, _ in said] == ["created", "updated", "updated"]
    assert len({job_id for _, job_id in said}) == 1
    assert queue.dequeue() is None  # not before a second of quiet
    job = eventually(queue.dequeue, 5)
    assert (job.id, job.payload[:2]) == (said[0][1], ["add", [2, 2]])
    assert queue.dequeue() is None


def test_a_throttled_key_runs_one_job_per_ttl(enqueue: Enqueue) -> None:
    first = _said(enqueue("add", [1, 1], "--key", "k", "--ttl", "30"))
    again = _said(enqueue("add", [2, 2], "--key", "k", "--ttl", "30"))
    assert (first[0], again) == ("created", ("deduplicated", first[1]))


def test_keep_last_keeps_one_follow_up_while_the_job_of_its_key_runs(
    enqueue: Enqueue, queue: durq.Queue
) -> None:
    options = ("--key", "sync", "--keep-last")
    status, first = _said(enqueue("add", [1, 1], *options))
    running = queue.dequeue()
    assert running is not None and (status, running.id) == ("created", first)
    said = [_said(enqueue("add", [i, i], *options)) for i in (2, 3)]
    assert [s for s, _ in said] == ["created", "updated"] and said[0][1] == said[1][1]
    info = queue.job(said[0][1])
    assert info is not None and info.waits_for == first


def test_replace_supersedes_the_job_of_the_key_and_says_which(
    enqueue: Enqueue, queue: durq.Queue
) -> None:
    _, old = _said(enqueue("add", [1, 1], "--key", "k"))
    result = enqueue("add", [2, 2], "--key", "k", "--replace")
    status, new = _said(result)
    assert status == "replaced" and result.output.endswith(f"(superseded job {old})\n")
    assert [job.id for job in queue.dequeue_many(10)] == [new]


_BAD = [
    (["--debounce", "1"], "debounce needs a key"),
    (["--keep-last"], "keep_last needs a key"),
    (["--replace"], "replace=True needs a key"),
    (["--key", "k", "--max-wait", "3"], "max_wait bounds a debounce"),
    (["--key", "k", "--ttl", "1", "--keep-last"], "choose one dedup mode"),
    (["--key", "k", "--debounce", "1", "--delay", "1"], "debounce sets the delay itself"),
    (["--key", "k", "--debounce", "2", "--max-wait", "1"], "must be at least the debounce"),
    (["--key", "k", "--ttl", "0"], "ttl must be more than 0 seconds"),
    (["--expires", "0"], "expires must be a number of seconds in (0, "),
    (["--expires", "1", "--delay", "2"], "the job could never start"),
    (["--priority", "11"], "priority must be an int in -10..10"),
]


@pytest.mark.parametrize(("options", "message"), _BAD, ids=[" ".join(o) for o, _ in _BAD])
def test_bad_options_are_the_librarys_errors_in_one_line_and_nothing_is_enqueued(
    options: list[str], message: str, enqueue: Enqueue, queue: durq.Queue
) -> None:
    result = enqueue("add", [1, 2], *options)
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: ") and message in result.output
    assert len(result.output.splitlines()) == 1
    assert queue.stats().enqueued == 0


def test_an_option_that_is_not_a_number_is_a_usage_error(enqueue: Enqueue) -> None:
    result = enqueue("add", [1, 2], "--key", "k", "--ttl", "soon")
    assert result.exit_code == 2
    assert "Invalid value for '--ttl': 'soon' is not a valid float" in result.output


def test_a_bad_combination_from_a_shell_is_an_error_not_a_traceback(
    queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    shown = durq_cli.run(
        "enqueue", "add", "--args", "[1, 2]", "-q", queue_name, "--debounce", "5", url=redis_url
    )
    assert shown.code == 1, shown
    assert shown.stderr == "Error: debounce needs a key: it applies to the jobs of one key\n"
