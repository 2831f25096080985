"""``durq job cancel`` and what ``durq job`` shows of job control."""

from __future__ import annotations

import durq
from cli.support import durq as run


def test_cancel_says_what_happened_to_each_job(queue_name: str, redis_url: str) -> None:
    with durq.Queue(queue_name, redis_url) as q:
        q.enqueue("a")
        running = q.dequeue()
        assert running is not None
        waiting = q.enqueue("b").id
        result = run("job", "cancel", waiting, running.id, "-q", queue_name, "--url", redis_url)
        assert result.exit_code == 0, result.output
        assert f"{waiting}: cancelled: it will not run" in result.output
        assert f"{running.id}: running: its worker is stopping it" in result.output
        again = run("job", "cancel", waiting, "-q", queue_name, "--url", redis_url)
        assert "had ended already (cancelled)" in again.output
        shown = run("job", "show", running.id, "-q", queue_name, "--url", redis_url)
        assert "requested: its worker is stopping it" in shown.output


def test_cancel_of_an_unknown_id_is_an_error(queue_name: str, redis_url: str) -> None:
    result = run("job", "cancel", "no-such-job", "-q", queue_name, "--url", redis_url)
    assert result.exit_code == 1
    assert "no-such-job: not found in this queue" in result.output


def test_job_shows_progress_and_expiry(queue_name: str, redis_url: str) -> None:
    with durq.Queue(queue_name, redis_url) as q:
        q.enqueue("x", expires=3600)
        job = q.dequeue()
        assert job is not None
        q.progress(job, 0.42, {"rows": 420})
        result = run("job", job.id, "-q", queue_name, "--url", redis_url)
    assert result.exit_code == 0, result.output
    assert "42.0% at" in result.output and '{"rows":420}' in result.output
    assert "expires" in result.output


def test_job_help_lists_show_and_cancel() -> None:
    result = run("job", "--help")
    assert result.exit_code == 0
    assert "show" in result.output and "cancel" in result.output
