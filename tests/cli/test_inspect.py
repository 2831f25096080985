"""``durq stats``, ``durq job`` and ``durq workers``: what is in the queues, as a table."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

import durq
from cli.support import durq as run
from cli.support import table_row as _row
from durq.dev.server import RedisServer
from helpers import eventually
from worker.support import Durq, ExecLog, running_worker


def test_stats_shows_a_row_per_queue_with_its_sizes_and_totals(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str
) -> None:
    with running_worker(app):
        app.tasks["refuses"].enqueue(str(exec_log), "bad", "no")
        app.tasks["work"].enqueue(str(exec_log), "good")
        eventually(lambda: app.queue(queue_name).stats().size == 0, 10)
    app.tasks["work"].enqueue_many([(str(exec_log), f"k{i}") for i in range(3)])
    app.tasks["work"].options(delay=60).enqueue(str(exec_log), "later")

    result = run("stats", queue_name, "--no-rate", "--url", redis_url)
    assert result.exit_code == 0, result.output
    header = _row(result.output, "queue")
    assert header[:6] == ["queue", "pending", "delayed", "active", "held", "dead"]
    row = dict(zip(header, _row(result.output, queue_name), strict=True))
    assert row == {
        "queue": queue_name, "pending": "3", "delayed": "1", "active": "0", "held": "0",
        "dead": "1",
        "enqueued": "6", "completed": "1", "failed": "1", "retried": "0",
        "dead-lettered": "1", "reclaimed": "0",
    }  # fmt: skip


def test_stats_answers_at_once_and_measures_the_completion_rate_only_when_asked(
    app: durq.App, queue_name: str, redis_url: str
) -> None:
    # a plain `durq stats` reads once (it slept a second to measure a rate before)
    plain = run("stats", queue_name, "--url", redis_url)
    assert plain.exit_code == 0, plain.output
    assert "done/s" not in _row(plain.output, "queue")
    result = run("stats", queue_name, "--rate", "--url", redis_url)
    assert result.exit_code == 0, result.output
    header = _row(result.output, "queue")
    assert "done/s" in header
    assert dict(zip(header, _row(result.output, queue_name), strict=True))["done/s"] == "0"


def test_stats_on_a_narrow_terminal_keeps_queue_names_and_numbers_whole(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str
) -> None:
    long_name = f"{queue_name}-with-a-rather-long-name"
    app.tasks["work"].options(queue=long_name).enqueue_many(
        [(str(exec_log), str(i)) for i in range(12)]
    )
    result = run("stats", long_name, "--no-rate", "--url", redis_url, columns=80)
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80
    assert "…" not in result.output
    # split in two tables, each with the queue's row: sizes, then totals
    assert result.output.count(long_name) == 2
    assert _row(result.output, long_name)[1:] == ["12", "0", "0", "0", "0"]
    assert "since each queue was created" in result.output


def test_stats_with_groups_shows_the_largest_groups(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str
) -> None:
    work = app.tasks["work"]
    calls = [work.call(str(exec_log), "x").with_options(group="big") for _ in range(5)]
    calls += [work.call(str(exec_log), "y").with_options(group="small") for _ in range(2)]
    calls += [work.call(str(exec_log), "z").with_options(group="tiny")]
    app.enqueue_calls(calls)

    result = run("stats", queue_name, "--no-rate", "--groups", "2", "--url", redis_url)
    assert result.exit_code == 0, result.output
    groups_table = result.output.split("largest groups", 1)[1]
    rows = [line.split() for line in groups_table.splitlines() if line.split()[:1] == [queue_name]]
    assert [row[1:4] for row in rows] == [["big", "5", "0"], ["small", "2", "0"]]


def test_stats_without_queues_lists_every_known_queue(
    make_server: Callable[..., RedisServer], queue_name: str
) -> None:
    server = make_server()
    with (
        durq.Queue(f"{queue_name}-a", server.url) as a,
        durq.Queue(f"{queue_name}-b", server.url) as b,
    ):
        a.enqueue("x")
        b.enqueue("y")
    result = run("stats", "--no-rate", "--url", server.url)
    assert result.exit_code == 0, result.output
    assert _row(result.output, f"{queue_name}-a")[1] == "1"
    assert _row(result.output, f"{queue_name}-b")[1] == "1"


def test_stats_on_an_empty_server_says_there_are_no_queues_yet(
    make_server: Callable[..., RedisServer],
) -> None:
    result = run("stats", "--url", make_server().url)
    assert result.exit_code == 0
    assert "no queues yet" in result.output


def test_job_shows_its_state_attempts_and_payload(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str
) -> None:
    handle = app.tasks["work"].options(delay=60, group="tenant-9").enqueue(str(exec_log), "k")
    result = run("job", "-q", queue_name, "--url", redis_url, "--", handle.id)
    assert result.exit_code == 0, result.output
    assert f"job {handle.id}" in result.output
    assert _row(result.output, "state")[1] == "delayed"
    assert _row(result.output, "group")[1] == "tenant-9"
    assert _row(result.output, "attempts")[1] == "0/3"
    assert f'["work",["{exec_log}","k"],{{}}]' in result.output


def test_job_shows_the_errors_of_its_last_failed_attempts(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str
) -> None:
    with running_worker(app):  # explodes: ValueError on each of its 2 attempts
        handle = app.tasks["explodes"].enqueue(str(exec_log), "k", "invoice 7 is not a PDF")
        eventually(lambda: app.queue(queue_name).stats().dead == 1, 10)
    result = run("job", "-q", queue_name, "--url", redis_url, "--", handle.id)
    assert result.exit_code == 0, result.output
    output = " ".join(result.output.replace("│", " ").split())  # rows fold at 80 columns
    for attempt in (1, 2):
        assert f"attempt {attempt} failed" in output
    assert output.count("ValueError: invoice 7 is not a PDF") >= 2
    assert "in _parse_invoice" in output  # where the task's code raised it


def test_a_job_id_that_begins_with_a_dash_is_given_after_a_double_dash(
    app: durq.App, queue_name: str, redis_url: str
) -> None:
    # generated ids draw from A-Z a-z 0-9 - _, so one in 64 begins with "-"
    app.queue(queue_name).enqueue("x", id="-Xy_dash")
    mistaken = run("job", "-Xy_dash", "-q", queue_name, "--url", redis_url)
    assert mistaken.exit_code == 2  # read as options, as any CLI would
    result = run("job", "-q", queue_name, "--url", redis_url, "--", "-Xy_dash")
    assert result.exit_code == 0, result.output
    assert "job -Xy_dash" in result.output


def test_job_of_an_unknown_id_is_an_error(queue_name: str, redis_url: str) -> None:
    result = run("job", "no-such-job", "-q", queue_name, "--url", redis_url)
    assert result.exit_code == 1
    assert f"queue {queue_name} has no trace of job no-such-job" in result.output


def test_workers_on_a_server_without_workers_lists_none(
    make_server: Callable[..., RedisServer],
) -> None:
    result = run("workers", "--url", make_server().url)
    assert result.exit_code == 0
    assert "0 live workers" in result.output


@pytest.mark.parametrize(
    "command",
    [
        ["stats", "--no-rate"],
        ["workers"],
        ["job", "abc", "-q", "q"],
        ["dlq", "list", "-q", "q"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_an_unreachable_server_is_reported_in_one_line_not_a_traceback(
    command: list[str], make_server: Callable[..., RedisServer], durq_cli: Durq
) -> None:
    # (enqueue reports it too, after retrying for enqueue_retry_for, 10 s)
    server = make_server()
    url = server.url
    server.kill()
    shown = durq_cli.run(*command, "--url", url)
    assert shown.code == 1, shown
    assert "Traceback" not in shown.stderr
    assert re.fullmatch(r"Error: ConnectionError: .*refused.*\n", shown.stderr), shown


def test_job_without_a_queue_asks_every_queue_and_names_the_queue_and_the_task(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str
) -> None:
    # the issue: `durq job ID` required -q, and log lines do not name the queue
    other = f"{queue_name}-other"
    app.queue(other).enqueue("not a task call")
    handle = app.tasks["work"].options(delay=60).enqueue(str(exec_log), "k")
    result = run("job", "--url", redis_url, "--", handle.id)
    assert result.exit_code == 0, result.output
    assert _row(result.output, "queue")[1] == queue_name
    assert _row(result.output, "task")[1] == "work"
    assert _row(result.output, "state")[1] == "delayed"
    missing = run("job", "no-such-job", "--url", redis_url)
    assert missing.exit_code == 1
    assert "no queue has a trace of job no-such-job" in missing.output


def test_a_finished_job_shows_its_result_while_the_result_is_kept(
    app: durq.App, queue_name: str, redis_url: str
) -> None:
    # the issue: a completed job with result=True showed no result, then "no trace"
    @app.task(queue=queue_name, result=True)
    def total(items: list[int]) -> dict[str, int]:
        return {"total": sum(items)}

    handle = total.enqueue([1, 2, 3])
    with running_worker(app, queues=[queue_name]):
        assert handle.result(timeout=10) == {"total": 6}
    result = run("job", "--url", redis_url, "--", handle.id)
    assert result.exit_code == 0, result.output
    assert _row(result.output, "queue")[1] == queue_name
    assert _row(result.output, "state")[1] == "completed"
    assert _row(result.output, "result")[1] == '{"total":6}'


def test_a_finished_job_shows_task_arguments_attempts_timings_and_worker_while_its_result_is_kept(
    app: durq.App, queue_name: str, redis_url: str
) -> None:
    # the issue: once its record was gone, a completed job showed `attempts 0/0`,
    # `enqueued -`, no task, arguments, duration or worker: only the stored result
    @app.task(queue=queue_name, result=True, max_attempts=3)
    def total(items: list[int], label: str = "") -> int:
        return sum(items)

    small = total.enqueue([1, 2, 3], label="small")
    large = total.enqueue(list(range(400)))  # a payload past MAX_ARGS_BYTES
    with running_worker(app, queues=[queue_name]):
        assert small.result(timeout=10) == 6  # the result reads as before
        assert large.result(timeout=10) == sum(range(400))
    info = app.queue(queue_name).job(small.id)  # the record is gone: a tombstone
    assert info is not None and info.data is None and info.attempts == 0

    result = run("job", "--url", redis_url, "--", small.id, columns=160)
    assert result.exit_code == 0, result.output
    out = result.output
    assert _row(out, "task")[1] == "total"
    assert _row(out, "state")[1] == "completed"
    assert _row(out, "attempts")[1] == "1/3"
    assert _row(out, "deliveries")[1] == "1"
    assert _row(out, "arguments")[1:] == ['{"args":[[1,2,3]],"kwargs":{"label":"small"}}']
    for timing in ("enqueued", "started", "finished"):
        assert re.search(r"\d\d:\d\d:\d\d", " ".join(_row(out, timing)[1:])), out
    assert float(_row(out, "ran")[1]) < 30
    assert _row(out, "worker")[1] != "-"
    assert _row(out, "result")[1] == "6"

    result = run("job", "--url", redis_url, "-q", queue_name, "--", large.id, columns=160)
    assert result.exit_code == 0, result.output
    assert "not kept (" in " ".join(_row(result.output, "arguments"))
