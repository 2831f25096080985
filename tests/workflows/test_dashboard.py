"""The dashboard's workflow pages and the workflow counters of its /metrics."""

from __future__ import annotations

import re
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
        listing = httpx.get(f"{board.url}/queue/workflows", params={"q": q}, timeout=60)
        assert listing.status_code == 200 and handle.id in listing.text
        page = httpx.get(
            f"{board.url}/queue/workflow", params={"q": q, "id": handle.id}, timeout=60
        )
        assert page.status_code == 200
        for text in ("running", "group 2", "1 member still open", "dead step 4",
                     "waits for a replay", "collect", "waiting"):  # fmt: skip
            assert text in page.text, text
        Path(flag).touch()
        wapp.queue(q).replay(handle.step_id(4))
        handle.result(10)
    page = httpx.get(f"{board.url}/queue/workflow", params={"q": q, "id": handle.id}, timeout=60)
    assert "completed" in page.text and "It ended." in page.text
    metrics = httpx.get(f"{board.url}/metrics", timeout=60).text
    assert f'durq_workflows_started_total{{queue="{q}"}} 1.0' in metrics
    assert f'durq_workflows_completed_total{{queue="{q}"}} 1.0' in metrics
    assert f'durq_workflows_failed_total{{queue="{q}"}} 0.0' in metrics
    missing = httpx.get(f"{board.url}/queue/workflow", params={"q": q, "id": "nope"}, timeout=60)
    assert missing.status_code == 404


def _csrf_from(page: httpx.Response) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found is not None
    return found.group(1)


def test_the_workflow_page_cancels_a_running_workflow_with_a_csrf_checked_post(
    wapp: durq.App, log: str, board: LiveServer
) -> None:
    t = wapp.tasks
    q = wapp.default_queue
    # no worker runs: the workflow waits on its first steps, and the start of the one
    # in another queue (another slot) waits in the home queue's outbox
    far = t["square"].options(queue=f"{q}-b").s(log, 2)
    handle = durq.group([t["square"].s(log, 1), far]).then(t["collect"].s(log)).enqueue()
    with httpx.Client(base_url=board.url) as client:
        listing = client.get("/queue/workflows", params={"q": q})
        assert re.search(
            r'card warn"><span class="label">waiting</span><span class="value">1<', listing.text
        )
        where = {"q": q, "id": handle.id}
        page = client.get("/queue/workflow", params=where)
        assert page.status_code == 200 and "Cancel workflow" in page.text
        assert client.post("/queue/workflow/cancel", data=where).status_code == 403
        assert client.get("/queue/workflow/cancel", params=where).status_code == 405
        assert handle.status().state == "running"  # type: ignore[union-attr]

        done = client.post("/queue/workflow/cancel", data={**where, "csrf": _csrf_from(page)})
        assert done.status_code == 303
        assert done.headers["location"].endswith(
            f"/queue/workflow?q={q}&id={handle.id}&done=cancelled"
        )
        after = client.get(done.headers["location"])
        assert "Cancelled: its steps" in after.text and "Cancel workflow" not in after.text
        assert handle.status().state == "cancelled"  # type: ignore[union-attr]
        with pytest.raises(durq.Cancelled):
            handle.result(1)

        again = client.post("/queue/workflow/cancel", data={**where, "csrf": _csrf_from(page)})
        assert again.headers["location"].endswith("&done=finished")
        assert "had ended already" in client.get(again.headers["location"]).text


def test_a_read_only_dashboard_offers_no_workflow_cancel(wapp: durq.App, log: str) -> None:
    handle = durq.chain(wapp.tasks["square"].s(log, 1)).enqueue()
    app = create_app(wapp.url, sample_interval=0.25, refresh=0, read_only=True)
    server = LiveServer(app).start()
    try:
        where = {"q": wapp.default_queue, "id": handle.id}
        page = httpx.get(f"{server.url}/queue/workflow", params=where, timeout=60)
        assert page.status_code == 200 and "Cancel workflow" not in page.text
        refused = httpx.post(f"{server.url}/queue/workflow/cancel", data=where)
        assert refused.status_code == 403
    finally:
        server.stop()
    assert handle.status().state == "running"  # type: ignore[union-attr]
