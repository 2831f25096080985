"""``durq dlq list|show|replay|purge``: looking at dead letters and repairing them."""

from __future__ import annotations

import pytest

import durq
from cli.support import durq as run
from durq.models import JobState
from helpers import eventually
from worker.support import ExecLog, running_worker


@pytest.fixture
def dead(app: durq.App, exec_log: ExecLog, queue_name: str) -> list[durq.JobHandle[str]]:
    """Two dead letters of the test queue: a ValueError after 2 attempts, then a Fail."""
    queue = app.queue(queue_name)
    with running_worker(app):
        exploded = app.tasks["explodes"].enqueue(str(exec_log), "a", "row 3 is not a number")
        eventually(lambda: queue.stats().dead == 1, 10)
        refused = app.tasks["refuses"].enqueue(str(exec_log), "b", "the invoice is void")
        eventually(lambda: queue.stats().dead == 2, 10)
    return [exploded, refused]


def test_dlq_list_shows_each_dead_letter_newest_first_with_its_reason(
    dead: list[durq.JobHandle[str]], queue_name: str, redis_url: str
) -> None:
    result = run("dlq", "list", "-q", queue_name, "--url", redis_url)
    assert result.exit_code == 0, result.output
    assert f"2 dead letters in {queue_name}" in result.output
    exploded, refused = dead
    lines = [
        line for line in result.output.splitlines() if exploded.id in line or refused.id in line
    ]
    assert len(lines) == 2
    assert refused.id in lines[0] and exploded.id in lines[1]  # newest first
    assert "1/5" in lines[0] and "failed" in lines[0] and "the invoice is void" in lines[0]
    assert "2/2" in lines[1] and "exception" in lines[1]
    assert "ValueError: row 3 is not a number" in lines[1]
    # the issue: dlq list had no task column
    assert "refuses" in lines[0] and "explodes" in lines[1]


def test_dlq_list_with_a_limit(
    dead: list[durq.JobHandle[str]], queue_name: str, redis_url: str
) -> None:
    result = run("dlq", "list", "-q", queue_name, "--limit", "1", "--url", redis_url)
    assert result.exit_code == 0
    assert dead[1].id in result.output and dead[0].id not in result.output
    assert "2 dead letters" in result.output


def test_dlq_show_shows_the_traceback_of_a_dead_letter(
    dead: list[durq.JobHandle[str]], queue_name: str, redis_url: str
) -> None:
    result = run("dlq", "show", "-q", queue_name, "--url", redis_url, "--", dead[0].id)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "dead" in out and "2/2" in out
    assert "reason.type" in out and "builtins.ValueError" in out
    assert "reason.traceback" in out and "Traceback (most recent call last)" in out
    assert "_parse_invoice" in out
    assert "ValueError: row 3 is not a number" in out


def test_dlq_show_of_a_job_that_is_not_dead_is_an_error(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str
) -> None:
    pending = app.tasks["work"].enqueue(str(exec_log), "p")
    result = run("dlq", "show", "-q", queue_name, "--url", redis_url, "--", pending.id)
    assert result.exit_code == 1
    assert f"{pending.id} is not a dead letter of {queue_name}" in result.output


def test_dlq_replay_puts_a_dead_letter_back_with_fresh_attempts_and_it_runs_again(
    dead: list[durq.JobHandle[str]],
    app: durq.App,
    exec_log: ExecLog,
    queue_name: str,
    redis_url: str,
) -> None:
    queue = app.queue(queue_name)
    result = run("dlq", "replay", "-q", queue_name, "--url", redis_url, "--", dead[0].id)
    assert result.exit_code == 0, result.output
    assert "replayed 1 job(s)" in result.output
    info = queue.job(dead[0].id)
    assert info is not None
    assert (info.state, info.attempts) == (JobState.PENDING, 0)
    assert queue.stats().dead == 1

    with running_worker(app):  # it still fails: two more attempts, then dead again
        eventually(lambda: queue.stats().dead == 2, 10)
    assert exec_log.count("start", "a") == 4


def test_dlq_replay_all(dead: list[durq.JobHandle[str]], app: durq.App, queue_name: str,
                        redis_url: str) -> None:  # fmt: skip
    result = run("dlq", "replay", "--all", "-q", queue_name, "--url", redis_url)
    assert result.exit_code == 0
    assert "replayed 2 job(s)" in result.output
    stats = app.queue(queue_name).stats()
    assert (stats.dead, stats.pending, stats.replayed) == (0, 2, 2)


def test_dlq_purge_deletes_the_dead_letters_named(
    dead: list[durq.JobHandle[str]], app: durq.App, queue_name: str, redis_url: str
) -> None:
    result = run("dlq", "purge", "-q", queue_name, "--url", redis_url, "--", dead[1].id)
    assert result.exit_code == 0
    assert "purged 1 job(s)" in result.output
    queue = app.queue(queue_name)
    assert queue.job(dead[1].id) is None
    assert [d.id for d in queue.dead_letters()] == [dead[0].id]


def test_dlq_purge_all_asks_first_unless_told_yes(
    dead: list[durq.JobHandle[str]], app: durq.App, queue_name: str, redis_url: str
) -> None:
    queue = app.queue(queue_name)
    declined = run("dlq", "purge", "--all", "-q", queue_name, "--url", redis_url, input="n\n")
    assert declined.exit_code == 1
    assert f"delete every dead letter of {queue_name}?" in declined.output
    assert "Aborted" in declined.output
    assert queue.stats().dead == 2

    confirmed = run("dlq", "purge", "--all", "-q", queue_name, "--url", redis_url, input="y\n")
    assert confirmed.exit_code == 0
    assert "purged 2 job(s)" in confirmed.output
    assert queue.stats().dead == 0


def test_dlq_purge_all_with_yes_does_not_ask(
    dead: list[durq.JobHandle[str]], app: durq.App, queue_name: str, redis_url: str
) -> None:
    result = run("dlq", "purge", "--all", "--yes", "-q", queue_name, "--url", redis_url)
    assert result.exit_code == 0
    assert "?" not in result.output
    assert app.queue(queue_name).stats().dead == 0


@pytest.mark.parametrize("command", ["replay", "purge"])
def test_dlq_replay_and_purge_take_ids_or_all_but_not_both(
    command: str, queue_name: str, redis_url: str
) -> None:
    neither = run("dlq", command, "-q", queue_name, "--url", redis_url)
    both = run("dlq", command, "some-id", "--all", "-q", queue_name, "--url", redis_url)
    for result in (neither, both):
        assert result.exit_code == 2
        assert "give job ids, or --all (not both)" in result.output
