"""The dashboard in a real headless Chromium: pages, replay through the UI, XSS,
read-only mode, token auth, and the screenshots for docs/screenshots/."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
from playwright.sync_api import Error as PlaywrightError

import durq
from dashboard import scenario
from dashboard.apps import BROKEN, build
from dashboard.support import LiveServer, running_worker, screenshot_dir
from durq.dev.server import RedisServer
from helpers import eventually

Serve = Callable[..., LiveServer]

XSS = "<img src=x onerror=alert(1)>"
SCRIPT_END = "</script><script>alert(2)</script>"


def _shot(page: Any, directory: Path, name: str) -> Path:
    path = directory / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000
    return path


def test_pages_of_a_busy_namespace_and_screenshots(
    make_server: Callable[..., RedisServer], serve: Serve, page: Any, tmp_path: Path
) -> None:
    server = make_server()  # a private server: only this scenario's queues are listed
    app = build(server.url)
    shots = screenshot_dir(tmp_path)
    try:
        scenario.seed(app)
        dash = serve(server.url, sample_interval=0.5)
        with running_worker(app, queues=["emails", "imports", "thumbnails"], concurrency=16):
            scenario.stream(app, 9.0)
            page.goto(dash.url + "/")
            assert page.title() == "Queues · durq"
            for queue in ("emails", "imports", "thumbnails", "reports"):
                assert page.locator("table.queues a", has_text=queue).count() == 1
            eventually(lambda: page.reload() or page.locator("polyline").count() >= 6, 10)
            _shot(page, shots, "overview")

            page.click("table.queues a:text-is('imports')")
            assert page.locator("h1").inner_text() == "imports"
            assert page.locator("table.groups tbody tr").count() == 20
            assert "tenant-" in page.locator("table.groups").inner_text()
            assert page.locator("#live-workers").get_by_text("import_rows").count() > 0
            _shot(page, shots, "queue")

            page.goto(dash.url + "/workers")
            assert page.locator("table.workers tbody tr").count() == 1
            _shot(page, shots, "workers")

        page.goto(dash.url + "/queue/dead?q=emails")
        rows = page.locator("table.dead tbody tr")
        assert rows.count() > 0
        assert "UpstreamError" in rows.first.inner_text()
        _shot(page, shots, "dead-letters")

        rows.first.locator("a").first.click()
        assert page.locator("h1 .state").inner_text() == "dead"
        assert "550 mailbox unavailable" in page.locator("pre.traceback").first.inner_text()
        assert "send_email" in page.locator("table.fields").first.inner_text()
        _shot(page, shots, "job")
    finally:
        app.close()


def _dead_letter(queue: durq.Queue, payload: Any, reason: dict[str, str], **options: Any) -> str:
    """Enqueue ``payload`` and dead-letter it at once with ``reason``; returns its id.
    The queue must hold nothing else ready."""
    queue.enqueue(payload, **options)
    job = queue.dequeue()
    assert job is not None
    queue.requeue(job, reason=reason, dead=True)
    return job.id


def test_replay_a_dead_job_through_the_ui_and_a_worker_runs_it(
    app: durq.App, redis_url: str, queue_name: str, serve: Serve, page: Any
) -> None:
    label = f"bug-{queue_name}"
    BROKEN.add(label)
    queue = app.queue(queue_name)
    try:
        handle = app.tasks["fragile"].options(queue=queue_name).enqueue(label)
        with running_worker(app, queues=[queue_name]):
            eventually(lambda: queue.stats().dead == 1, what="the job to be dead-lettered")
            BROKEN.discard(label)  # the bug is fixed: replay it
            dash = serve(redis_url)
            page.goto(f"{dash.url}/queue/dead?q={queue_name}")
            row = page.locator("table.dead tbody tr")
            assert row.count() == 1
            assert handle.id in row.inner_text()
            assert f"{label} is broken" in row.inner_text()
            row.locator("input[type=checkbox]").check()
            page.click("button:text-is('Replay selected')")
            assert page.locator(".flash").inner_text() == "Replayed 1 job."
            eventually(lambda: queue.stats().completed == 1, what="the replayed job to run")
        assert queue.stats().dead == 0
        info = queue.job(handle.id)
        assert info is not None and info.state is durq.JobState.COMPLETED
        page.reload()
        assert page.locator("table.dead tbody tr").count() == 0
        assert "No dead letters" in page.locator("main").inner_text()
    finally:
        BROKEN.discard(label)


def test_purge_one_then_all_through_the_ui(
    redis_url: str, queue_name: str, serve: Serve, page: Any
) -> None:
    with durq.Queue(queue_name, redis_url) as queue:
        ids = [_dead_letter(queue, {"n": i}, {"message": f"failure {i}"}) for i in range(4)]
        dash = serve(redis_url)
        page.goto(f"{dash.url}/queue/job?q={queue_name}&id={ids[0]}")
        page.click("button:text-is('Purge')")  # confirm() is accepted by the fixture
        assert page.locator(".flash").inner_text() == "Purged 1 job."
        purged = queue.job(ids[0])
        assert purged is None or purged.state is not durq.JobState.DEAD
        assert page.locator("table.dead tbody tr").count() == 3

        page.locator(f"input[value='{ids[1]}']").check()
        page.locator(f"input[value='{ids[2]}']").check()
        page.click("button:text-is('Purge selected')")
        assert page.locator(".flash").inner_text() == "Purged 2 jobs."
        assert queue.stats().dead == 1

        page.click("button:text-is('Purge all')")
        assert page.locator(".flash").inner_text() == "Purged 1 job."
        assert queue.stats().dead == 0


def test_job_data_shows_as_text_never_as_markup(
    redis_url: str, queue_name: str, serve: Serve, page: Any
) -> None:
    with durq.Queue(queue_name, redis_url) as queue:
        dead_id = _dead_letter(
            queue,
            ["crash", [XSS, SCRIPT_END], {"note": XSS}],
            {"message": XSS, "type": SCRIPT_END, "traceback": f"Traceback:\n{SCRIPT_END}\n{XSS}"},
            id=f"{XSS}-dead",
            group=SCRIPT_END,
        )
        queue.enqueue({"html": XSS, "end": SCRIPT_END}, id=f"{SCRIPT_END}-ready", group=XSS)
    dash = serve(redis_url)
    pages = [
        f"/queue?{urlencode({'q': queue_name, 'group': SCRIPT_END})}",  # XSS in the top groups
        f"/queue/dead?q={queue_name}",
        f"/queue/job?{urlencode({'q': queue_name, 'id': dead_id})}",
        f"/queue/job?{urlencode({'q': queue_name, 'id': SCRIPT_END + '-ready'})}",
    ]
    for path in pages:
        response = page.goto(dash.url + path)
        assert response is not None and response.status == 200, path
        text = page.locator("main").inner_text()
        assert XSS in text, path
        assert SCRIPT_END in text, path
        assert page.locator("img").count() == 0, path
        assert page.locator("script").count() == 1, path  # durq.js only
    page.goto(dash.url + f"/queue/dead?q={queue_name}")
    page.locator("details summary").first.click()
    assert SCRIPT_END in page.locator("pre.traceback").first.inner_text()


def test_read_only_mode_shows_no_actions_and_refuses_them(
    redis_url: str, queue_name: str, serve: Serve, page: Any
) -> None:
    with durq.Queue(queue_name, redis_url) as queue:
        job_id = _dead_letter(queue, {"n": 1}, {"message": "nope"})
    dash = serve(redis_url, read_only=True)
    for path in (f"/queue/dead?q={queue_name}", f"/queue/job?q={queue_name}&id={job_id}"):
        page.goto(dash.url + path)
        assert page.locator(".badge.ro").inner_text() == "read-only"
        assert page.locator("form[method=post]").count() == 0
        assert page.locator("input[type=checkbox]").count() == 0
        for label in ("Replay", "Purge", "Replay selected", "Purge all"):
            assert page.locator(f"button:text-is('{label}')").count() == 0
    assert job_id in page.locator("main").inner_text()
    refused = httpx.post(
        f"{dash.url}/queue/dead/purge",
        data={"q": queue_name, "all": "1", "csrf": "x"},
    )
    assert refused.status_code == 403
    with durq.Queue(queue_name, redis_url) as queue:
        assert queue.stats().dead == 1


def _sign_in_refused(page: Any, url: str) -> bool:
    """True when navigating to ``url`` shows the 401 answer, or when Chromium gives up
    on the refused credentials (headless, it has no sign-in dialog to show)."""
    try:
        response = page.goto(url)
    except PlaywrightError as exc:
        return "ERR_INVALID_AUTH_CREDENTIALS" in str(exc)
    return response is not None and response.status == 401


def test_a_token_protected_dashboard_asks_the_browser_to_sign_in(
    browser: Any, redis_url: str, serve: Serve
) -> None:
    token = "s3cret-token-for-tests"
    dash = serve(redis_url, token=token)
    # a browser without the credentials gets the sign-in challenge, and no page
    for credentials in (None, {"username": "ops", "password": "guess-guess"}):
        context = browser.new_context(http_credentials=credentials)
        try:
            answer = context.request.get(dash.url + "/")
            assert answer.status == 401
            assert answer.headers["www-authenticate"].startswith("Basic")
            assert "Queues" not in answer.text()
            assert _sign_in_refused(context.new_page(), dash.url + "/")
        finally:
            context.close()
    signed_in = browser.new_context(http_credentials={"username": "ops", "password": token})
    try:
        page = signed_in.new_page()
        response = page.goto(dash.url + "/")
        assert response is not None and response.status == 200
        assert page.locator("h1").inner_text() == "Queues"
        assert token not in page.content()
    finally:
        signed_in.close()


def test_live_sections_update_without_a_reload(
    redis_url: str, queue_name: str, serve: Serve, page: Any
) -> None:
    dash = serve(redis_url, refresh=0.3)
    with durq.Queue(queue_name, redis_url) as queue:
        queue.enqueue({"n": 0})
        page.goto(f"{dash.url}/queue?q={queue_name}")
        pending = page.locator("#live-summary .card").first.locator(".value")
        assert pending.inner_text() == "1"
        page.evaluate("window.notReloaded = true")
        queue.enqueue_many([{"n": i} for i in range(1, 42)])
        eventually(lambda: pending.inner_text() == "42", what="the pending count to update")
        assert page.evaluate("window.notReloaded") is True
