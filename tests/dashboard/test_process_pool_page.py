"""The workers page lists each child of a worker's process pool (docs/process-pool.md)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx

from dashboard.support import LiveServer
from helpers import eventually
from worker import pool_app
from worker.support import ExecLog, running_worker

Serve = Callable[..., LiveServer]


def test_the_workers_page_shows_each_child_with_its_job_jobs_run_and_memory(
    redis_url: str, queue_name: str, serve: Serve, tmp_path: Path
) -> None:
    exec_log = ExecLog(tmp_path / "executions.jsonl")
    app = pool_app.build(redis_url, default_queue=queue_name)
    try:
        with running_worker(app, concurrency=2, pool="process") as worker:
            app.tasks["whoami"].enqueue(str(exec_log), "a").result(timeout=10)
            busy = app.tasks["waits_for_cancel"].enqueue(str(exec_log), "busy", 30.0)
            eventually(lambda: exec_log.count("start", "busy") == 1, 10)
            pool = worker._pool
            assert pool is not None
            pids = {c.pid for c in pool.children}
            dash = serve(redis_url)
            with httpx.Client(base_url=dash.url) as client:

                def listed() -> bool:
                    page = client.get("/workers").text
                    return "Process pool of" in page and "waits_for_cancel" in page

                eventually(listed, 5, "the children on the workers page")
                page = client.get("/workers").text
            assert all(f'<td class="n">{pid}</td>' in page for pid in pids)
            assert "busy" in page and "idle" in page and " MB</td>" in page
            busy.cancel()
    finally:
        app.close()
