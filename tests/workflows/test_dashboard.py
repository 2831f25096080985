"""The dashboard's workflow pages and the workflow counters of its /metrics."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import durq
from dashboard.support import LiveServer
from durq.dashboard import create_app
from helpers import eventually
from worker.support import running_worker


@pytest.fixture
def board(wapp: durq.App) -> Iterator[LiveServer]:
    # every queue of the shared server, so this test's is among them
    app = create_app(wapp.url, sample_interval=0.25, refresh=0, max_queues=10_000)
    server = LiveServer(app).start()
    yield server
    server.stop()


def test_workflow_pages_show_steps_and_where_it_waits(
    wapp: durq.App, log: str, board: LiveServer, tmp_path: Path
) -> None:
    t = wapp.tasks
    q = wapp.default_queue
    flag = str(tmp_path / "flag")
    members = [t["square"].s(log, 1), t["dies_until"].s(log, "late", flag)]
    handle = durq.group(members).then(t["collect"].s(log)).enqueue(on_failure="wait")
    with running_worker(wapp):
        eventually(lambda: (i := handle.status()) and i.dead, 10, "a dead step")
        listing = httpx.get(f"{board.url}/queue/workflows", params={"q": q})
        assert listing.status_code == 200 and handle.id in listing.text
        page = httpx.get(f"{board.url}/queue/workflow", params={"q": q, "id": handle.id})
        assert page.status_code == 200
        for text in ("running", "group 2", "1 member still open", "dead step 4",
                     "waits for a replay", "collect", "waiting"):  # fmt: skip
            assert text in page.text, text
        Path(flag).touch()
        wapp.queue(q).replay(f"{handle.id}.4")
        handle.result(10)
    page = httpx.get(f"{board.url}/queue/workflow", params={"q": q, "id": handle.id})
    assert "completed" in page.text and "It ended." in page.text
    metrics = httpx.get(f"{board.url}/metrics").text
    assert f'durq_workflows_started_total{{queue="{q}"}} 1.0' in metrics
    assert f'durq_workflows_completed_total{{queue="{q}"}} 1.0' in metrics
    assert f'durq_workflows_failed_total{{queue="{q}"}} 0.0' in metrics
    missing = httpx.get(f"{board.url}/queue/workflow", params={"q": q, "id": "nope"})
    assert missing.status_code == 404
