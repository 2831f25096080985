"""``durq worker MODULE:APP``: options, logs, and mistakes a user can make."""

from __future__ import annotations

import json
import re
import signal

import pytest

import durq
from cli.support import durq as run
from durq.transport import connection
from durq.worker.registry import list_workers
from helpers import eventually
from worker.support import Durq, ExecLog


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_such_module:app", "cannot import 'no_such_module'"),
        ("worker.apps:build", "'worker.apps:build' is not a durq.App (found function)"),
        ("worker.apps", "expected MODULE:APP"),
        ("worker.apps:ap", "module 'worker.apps' has no attribute 'ap'; its durq.App: app"),
    ],
)
def test_worker_refuses_a_target_that_is_not_an_app(target: str, message: str) -> None:
    result = run("worker", target, "--url", "redis://127.0.0.1:1/0")
    assert result.exit_code == 2
    assert message in result.output


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["-c", "0"], "concurrency must be >= 1"),
        (["--prefetch", "-1"], "prefetch must be >= 0"),
        (["--lease", "0"], "lease must be between 0.05"),
        (["--lease", "0.01"], "lease must be between 0.05"),
        (["-q", "no spaces"], "invalid queue name 'no spaces'"),
        (["-p", "2", "-c", "0"], "concurrency must be >= 1"),
    ],
    ids=["no-concurrency", "negative-prefetch", "zero-lease", "tiny-lease", "bad-queue",
         "supervised"],
)  # fmt: skip
def test_worker_refuses_bad_settings_before_it_starts(options: list[str], message: str) -> None:
    # with -p, before any child starts (children failing at start are restarted forever)
    result = run("worker", "worker.apps:app", *options, "--url", "redis://127.0.0.1:1/0")
    assert result.exit_code == 2
    assert f"Error: {message}" in result.output


def test_worker_runs_at_most_concurrency_jobs_at_once(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    app.tasks["work"].enqueue_many([(str(exec_log), f"job-{i}", 0.4) for i in range(6)])
    worker = durq_cli.worker(redis_url, queue_name, args=("-c", "3", "--burst"))
    assert worker.wait(20) == 0, worker.output()

    events = sorted(exec_log.events(), key=lambda e: e["time"])
    running = peak = 0
    for event in events:
        running += 1 if event["event"] == "start" else -1
        peak = max(peak, running)
    assert peak == 3
    assert len(exec_log.keys("finish")) == 6


def test_worker_logs_one_json_object_per_line_with_the_job_fields(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    failing = app.tasks["refuses"].enqueue(str(exec_log), "bad", "no")
    worker = durq_cli.worker(redis_url, queue_name, args=("--log-format", "json", "--burst"))
    assert worker.wait(20) == 0, worker.output()

    entries = [json.loads(line) for line in worker.output().splitlines() if line.strip()]
    assert {"time", "level", "logger", "message"} <= set(entries[0])
    (dead,) = [e for e in entries if e.get("outcome") == "dead"]
    assert dead["level"] == "error"
    assert (dead["job_id"], dead["task"], dead["queue"], dead["attempt"]) == (
        failing.id, "refuses", queue_name, 1,
    )  # fmt: skip
    assert "failed: no" in dead["message"]


def test_task_loggers_come_out_with_the_job_and_each_failed_attempt_logs_its_traceback(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    """Issue 35: a task's ``logging.getLogger(__name__).info(...)`` printed nothing, its
    ``.warning()`` a bare message, and a retried attempt's traceback was nowhere."""
    sync = app.tasks["chatty"].enqueue("o-1")
    coro = app.tasks["achatty"].enqueue("o-2")
    exploding = app.tasks["explodes"].enqueue(str(exec_log), "e", "bad row 3")
    worker = durq_cli.worker(redis_url, queue_name, args=("--burst",))
    assert worker.wait(20) == 0, worker.output()
    out = worker.output()
    assert re.search(
        rf"\d\d:\d\d:\d\d,\d+ INFO +shop.orders: charging order o-1 "
        rf"\[chatty job {sync.id} queue {queue_name} attempt 1/3\]",
        out,
    ), out
    assert f"WARNING shop.orders: order o-2 is late [achatty job {coro.id} queue " in out
    # the first attempt is retried: its warning carries the traceback beneath it
    line = f"job {exploding.id} (explodes) of {queue_name} failed at attempt 1/2"
    retried = out[out.index(line) :]
    assert retried.splitlines()[1].startswith("Traceback (most recent call last):"), out
    assert "_parse_invoice" in retried and "ValueError: bad row 3" in retried

    again = app.tasks["chatty"].enqueue("o-3")
    app.tasks["explodes"].enqueue(str(exec_log), "e2", "bad row 4")
    json_worker = durq_cli.worker(redis_url, queue_name, args=("--burst", "--log-format", "json"))
    assert json_worker.wait(20) == 0, json_worker.output()
    entries = [json.loads(line) for line in json_worker.output().splitlines() if line.strip()]
    (mine,) = [e for e in entries if e["logger"] == "shop.orders"]
    assert (mine["job_id"], mine["task"], mine["queue"], mine["attempt"]) == (
        again.id, "chatty", queue_name, 1,
    )  # fmt: skip
    (retry,) = [e for e in entries if e.get("outcome") == "retry"]
    assert "ValueError: bad row 4" in retry["exception"]


def test_worker_log_level_warning_leaves_out_the_info_lines(
    queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    worker = durq_cli.worker(redis_url, queue_name, args=("--log-level", "warning"))
    with connection.sync_client(redis_url) as client:  # running: it registered itself
        eventually(lambda: any(w["pid"] == worker.pid for w in list_workers(client)), 15)
    worker.send(signal.SIGTERM)
    assert worker.wait(10) == 0
    assert "consuming" not in worker.output()
    assert "SIGTERM received" in worker.output()


def test_an_import_error_inside_the_worker_is_not_retried_on_another_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With uvloop installed, an ImportError the worker raises propagates as it is: the
    worker's coroutine is not started again on asyncio's loop."""
    import asyncio
    import sys
    import types

    from durq.cli.worker import _run

    runs: list[str] = []

    class Worker:
        handle_signals = True

        def on_signal(self, signum: int) -> None: ...

        async def run(self) -> None:
            runs.append("ran")
            raise ImportError("a task's module is missing")

    fake = types.ModuleType("uvloop")
    fake.run = asyncio.run  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "uvloop", fake)
    with pytest.raises(ImportError, match="a task's module is missing"):
        _run(Worker())  # type: ignore[arg-type]
    assert runs == ["ran"]
