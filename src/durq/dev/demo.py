"""``durq demo``: durq handling the hard cases, live, in well under a minute.

It starts an embedded Redis (append-only persistence on), two worker processes running
``durq.dev.demo_app``, and enqueues uploads for three users (one of them floods the queue)
plus a slow report. While they run it kills the worker that holds the report with
SIGKILL, starts a replacement, and shows the report coming back after its lease and
finishing elsewhere. At the end it sums up what happened.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from durq._process import die_with_parent
from durq.dev import demo_app
from durq.dev.server import RedisServer
from durq.worker.registry import list_workers

__all__ = ["run_demo"]

_USERS = {"bulk-importer": 120, "alice": 4, "bob": 4}
_TIME_LIMIT = 60.0


@dataclass
class _Story:
    events: list[str] = field(default_factory=list)
    start: float = field(default_factory=time.monotonic)
    done_at: dict[str, float] = field(default_factory=dict)
    killed: str | None = None
    report_deliveries: int = 0

    def say(self, text: str) -> None:
        self.events.append(f"[dim]{time.monotonic() - self.start:5.1f}s[/] {text}")

    def now(self) -> float:
        return time.monotonic() - self.start


def _start_worker(url: str, log: Path) -> subprocess.Popen[bytes]:
    argv = [
        sys.executable,
        "-m",
        "durq",
        "worker",
        "durq.dev.demo_app:app",
        "-q",
        "uploads",
        "-q",
        "reports",
        "-c",
        "6",
        "--url",
        url,
        "--heartbeat",
        "0.3",
        "--log-level",
        "WARNING",
    ]
    # a Ctrl-C that lands while Popen returns (the worker started, not yet in the
    # demo's list of workers to stop) would leave it running: it drains and stops when
    # the demo exits, whatever the demo's state then
    with log.open("ab") as out:
        return subprocess.Popen(
            argv, stdout=out, stderr=out, preexec_fn=die_with_parent(signal.SIGTERM)
        )


def _enqueue(story: _Story) -> Any:
    uploads = [
        demo_app.make_thumbnail.options(group="bulk-importer").call(
            "bulk-importer", f"import-{i:03d}.jpg"
        )
        for i in range(_USERS["bulk-importer"])
    ]
    demo_app.make_thumbnail.enqueue_many(uploads)
    story.say(f"bulk-importer uploaded {len(uploads)} photos at once")
    report = demo_app.build_report.enqueue("quarterly", 4.0)
    story.say(f"a slow report was requested (job {report.id})")
    for user in ("alice", "bob"):
        names = [f"{user}-{i}.png" for i in range(_USERS[user] - 1)]
        names.append("invoice.exe" if user == "bob" else f"{user}-last.png")
        demo_app.make_thumbnail.enqueue_many(
            [demo_app.make_thumbnail.options(group=user).call(user, n) for n in names]
        )
    story.say("alice and bob uploaded 4 photos each (one of bob's is not an image)")
    return report


def _view(
    story: _Story, stats: dict[str, Any], groups: list[Any], workers: list[dict[str, Any]]
) -> Group:
    table = Table(title="queues", expand=False)
    for col in (
        "queue",
        "pending",
        "delayed",
        "active",
        "completed",
        "retried",
        "dead",
        "reclaimed",
    ):
        table.add_column(col, justify="right")
    for name, s in stats.items():
        table.add_row(
            name,
            *(
                str(v)
                for v in (
                    s.pending,
                    s.delayed,
                    s.active,
                    s.completed,
                    s.retried,
                    s.dead,
                    s.reclaimed,
                )
            ),
        )
    gt = Table(title="uploads by user (served in turn)")
    for col in ("user", "waiting", "running", "finished at"):
        gt.add_column(col, justify="right")
    for g in groups:
        at = story.done_at.get(g.name)
        gt.add_row(g.name, str(g.ready), str(g.active), f"{at:.1f}s" if at else "-")
    wt = Table(title="workers")
    wt.add_column("worker")
    wt.add_column("jobs in hand", justify="right")
    for w in workers:
        wt.add_row(w["id"], str(w.get("in_hand", 0)))
    return Group(table, gt, wt, *story.events[-10:])


def run_demo(console: Console | None = None) -> int:
    """Run the demo; returns an exit code (0 when every job ended as expected)."""
    console = console or Console()
    tmp = Path(tempfile.mkdtemp(prefix="durq-demo-"))
    log = tmp / "workers.log"
    story = _Story()
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        ok = _run(console, story, tmp, log)
    except KeyboardInterrupt:  # stopped by its user (Ctrl-C, SIGTERM): nothing to keep
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if ok:  # each run would leave its folder behind; a failed run's logs are worth keeping
        shutil.rmtree(tmp, ignore_errors=True)
        console.print("[green]demo finished as expected[/]")
        return 0
    console.print(f"[red]unexpected end[/]; the workers' logs are in {log}")
    return 1


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _run(console: Console, story: _Story, tmp: Path, log: Path) -> bool:
    """The demo's server, workers and jobs, then its summary: whether every job ended as
    expected."""
    with RedisServer(appendonly=True, data_dir=tmp / "redis") as server:
        os.environ["DURQ_URL"] = server.url
        demo_app.app.url = server.url
        story.say(f"embedded Redis {'.'.join(map(str, server.version))} on {server.url}")
        procs: list[subprocess.Popen[bytes]] = []
        try:  # (a Ctrl-C at any point stops the workers started so far)
            for _ in range(2):
                procs.append(_start_worker(server.url, log))
            story.say("started 2 worker processes (6 jobs at once each, 2 s leases)")
            report = _enqueue(story)
            _watch(console, story, procs, report, server.url, log)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in procs:
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
        return _summary(console, story, report)


def _watch(
    console: Console,
    story: _Story,
    procs: list[subprocess.Popen[bytes]],
    report: Any,
    url: str,
    log: Path,
) -> None:
    uploads, reports = demo_app.app.queue("uploads"), demo_app.app.queue("reports")
    client = uploads.client
    with Live(console=console, refresh_per_second=8, transient=False) as live:
        while story.now() < _TIME_LIMIT:
            stats = {"uploads": uploads.stats(), "reports": reports.stats()}
            groups = uploads.groups(names=list(_USERS))
            workers = list_workers(client)
            for g in groups:
                if g.name not in story.done_at and g.ready == 0 and g.active == 0:
                    story.done_at[g.name] = story.now()
                    story.say(f"all of {g.name}'s uploads are handled")
            info = report.info()
            if info is not None and info.deliveries > story.report_deliveries:
                story.report_deliveries = info.deliveries
                if info.deliveries > 1:
                    story.say(
                        f"the report's lease ran out: handed to another worker "
                        f"(delivery {info.deliveries})"
                    )
            if story.killed is None:
                _maybe_kill(story, procs, workers, report.id, url, log)
            live.update(_view(story, stats, groups, workers))
            if all(s.size == 0 for s in stats.values()):
                story.say("every job has finished")
                live.update(_view(story, stats, groups, workers))
                return
            time.sleep(0.15)
        story.say("[red]time limit reached[/]")


def _maybe_kill(
    story: _Story,
    procs: list[subprocess.Popen[bytes]],
    workers: list[dict[str, Any]],
    report_id: str,
    url: str,
    log: Path,
) -> None:
    for w in workers:
        holding = [j for j in w.get("jobs", []) if j["id"] == report_id and j["running"]]
        if not holding:
            continue
        pid = int(w["id"].split(":")[1])
        for i, p in enumerate(procs):
            if p.pid == pid and story.now() > 1.0:
                p.send_signal(signal.SIGKILL)
                story.killed = w["id"]
                story.say(f"[red]killed worker pid {pid} (SIGKILL) while it ran the report[/]")
                procs[i] = _start_worker(url, log)
                story.say("started a replacement worker; the report's lease runs out in ≤2 s")


def _summary(console: Console, story: _Story, report: Any) -> bool:
    """Print what happened; whether every job ended where it should."""
    uploads = demo_app.app.queue("uploads")
    reports = demo_app.app.queue("reports")
    su, sr = uploads.stats(), reports.stats()
    if not console.is_terminal:  # the live view's last render ends without a newline there
        console.line()
    console.rule("what happened")
    console.print(f"processed: {su.completed} thumbnails and {sr.completed} report")
    console.print(f"retried after transient storage errors: {su.retried}")
    recovered = su.reclaimed + sr.reclaimed
    console.print(
        f"recovered after the worker was killed: {recovered} job(s) "
        f"(the report was handed out {story.report_deliveries} times)"
    )
    try:
        console.print(f"report result: {report.result(timeout=0.1)!r}")
    except Exception as exc:
        console.print(f"report: {exc}")
    for d in uploads.dead_letters():
        reason = d.reason or {}
        console.print(f"dead-lettered {d.id}: {reason.get('reason')}: {reason.get('message')}")
    for user in ("alice", "bob", "bulk-importer"):
        at = story.done_at.get(user)
        console.print(f"{user}: last upload handled at {at:.1f}s" if at else f"{user}: -")
    console.print(f"total time: {story.now():.1f}s")
    return (
        su.dead == 1
        and sr.completed == 1
        and su.size == 0
        and recovered >= 1
        and story.killed is not None
    )
