"""Where people meet schedules: current_job() in a task, the CLI, the dashboard page,
its actions and metrics."""

from __future__ import annotations

import re

import httpx

import durq
from cli.support import durq as run_in_process
from cli.support import durq_at
from dashboard.support import LiveServer
from durq.app.schedule_spec import pinned_queue
from durq.dashboard import create_app
from helpers import eventually
from schedules.apps import build, read_log
from worker.support import running_worker


def test_current_job_carries_the_schedule_and_tick(app: durq.App, log_path: str) -> None:
    app.schedule("hb", "tick", every=0.2, args=(log_path,))
    with running_worker(app, queues=[app.default_queue], concurrency=2):
        eventually(lambda: len(read_log(log_path)) >= 6, 10)
    starts = [e for e in read_log(log_path) if e["event"] == "start"]
    for e in starts:
        assert e["schedule"] == "hb"
        assert e["job"] == f"sched:hb@{round(e['tick'] * 1000)}"
        assert 0 <= e["time"] - e["tick"] < 2.0


def test_cli_lists_and_controls_schedules(app: durq.App, redis_url: str) -> None:
    app.schedule("hb", "tick", every=30, args=("log",))
    app.schedule("nightly", "add", cron="0 3 * * *", tz="Europe/Berlin", args=(1,))
    app.sync_schedules()
    q = app.default_queue
    out = durq_at(redis_url, "schedules", "list", "-q", q)
    assert out.code == 0, out
    assert "hb" in out.stdout and "nightly" in out.stdout and "Europe/Berlin" in out.stdout
    assert durq_at(redis_url, "schedules", "pause", "hb", "-q", q).code == 0
    info = app.schedules.get("hb")
    assert info is not None and info.paused
    assert durq_at(redis_url, "schedules", "resume", "hb", "-q", q).code == 0
    triggered = durq_at(redis_url, "schedules", "trigger", "nightly", "-q", q)
    assert triggered.code == 0 and "sched:nightly@" in triggered.stdout
    assert durq_at(redis_url, "schedules", "remove", "hb", "-q", q).code == 0
    assert app.schedules.get("hb") is None
    missing = durq_at(redis_url, "schedules", "pause", "hb", "-q", q)
    assert missing.code == 1 and "no schedule 'hb'" in missing.stderr


def test_cli_finds_the_schedules_of_a_sharded_queue(redis_url: str, queue_name: str) -> None:
    """A shard's keys carry the shard's own hash tag: the CLI must open ``name~i`` as a
    shard (it raised "invalid queue name 'name~0'" before, for every queue listed)."""
    app = build(redis_url, queue_name, shards=3)
    app.schedule("hb", "tick", every=30, args=("log",))
    app.sync_schedules()
    home = pinned_queue(queue_name, "hb", 3)
    for args in (["-q", queue_name], []):  # its queue, then every known queue
        out = durq_at(redis_url, "schedules", "list", *args)
        assert out.code == 0, out
        assert any(line.split()[:2] == [home, "hb"] for line in out.stdout.splitlines()), out
    assert durq_at(redis_url, "schedules", "pause", "hb", "-q", queue_name).code == 0
    info = app.schedules.get("hb")
    assert info is not None and info.paused and info.queue == home
    triggered = durq_at(redis_url, "schedules", "trigger", "hb", "-q", queue_name)
    assert triggered.code == 0 and "sched:hb@" in triggered.stdout, triggered
    assert durq_at(redis_url, "schedules", "remove", "hb", "-q", queue_name).code == 0
    assert app.schedules.get("hb") is None
    app.close()


def test_dashboard_page_actions_and_metrics(app: durq.App, redis_url: str) -> None:
    app.schedule("hb", "tick", every=30, args=("log",))
    app.sync_schedules()
    q = app.default_queue
    # the shared server holds every test's queues: cover them all, not the first 200
    live = LiveServer(create_app(redis_url, max_queues=10_000)).start()
    # /metrics reads every queue of the shared server: thousands late in a full run
    with httpx.Client(base_url=live.url, timeout=120) as client:
        page = client.get("/schedules")
        assert page.status_code == 200
        assert "hb" in page.text and "every 30 s" in page.text
        token = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert token is not None
        form = {"q": q, "s": "hb", "action": "pause"}
        assert client.post("/schedules/action", data=form).status_code == 403  # no CSRF
        done = client.post(
            "/schedules/action", data={**form, "csrf": token.group(1)}, follow_redirects=False
        )
        assert done.status_code == 303
        info = app.schedules.get("hb")
        assert info is not None and info.paused
        assert "Resume" in client.get("/schedules").text
        metrics = client.get("/metrics").text
        assert (
            f'durq_schedule_ticks_total{{outcome="fired",queue="{q}",schedule="hb"}} 0.0' in metrics
        )
        assert f'durq_schedule_active{{queue="{q}",schedule="hb"}} 0.0' in metrics
    live.stop()
    live = LiveServer(create_app(redis_url, read_only=True)).start()
    with httpx.Client(base_url=live.url) as client:
        assert client.post("/schedules/action", data=form).status_code == 403
    live.stop()


def test_cli_lists_schedules_readably_on_an_80_column_terminal(
    app: durq.App, redis_url: str
) -> None:
    """Eleven columns do not fit 80 characters: each schedule becomes a block of whole
    values (it was a table of ellipses: ``que… sch… task tim… sta…``)."""
    app.schedule("every-minute-cleanup", "tick", every=60, args=("log",))
    app.schedule("nightly", "add", cron="0 3 * * *", tz="Europe/Berlin", args=(1,))
    app.sync_schedules()
    q = app.default_queue
    out = run_in_process("schedules", "list", "-q", q, "--url", redis_url, columns=80)
    assert out.exit_code == 0, out.output
    assert "…" not in out.output
    assert f"every-minute-cleanup  (queue {q}, task tick)" in out.output
    assert "0 3 * * * (Europe/Berlin), active; next tick 20" in out.output
    assert "fired 0, skipped 0, missed 0" in out.output
    assert all(len(line) <= 80 for line in out.output.splitlines())
    wide = run_in_process("schedules", "list", "-q", q, "--url", redis_url, columns=200)
    assert "last outcome" in wide.output  # a wide terminal keeps the table
