"""The dashboard's job page: progress, expiry, and the cancel button (POST + CSRF)."""

from __future__ import annotations

import re
from collections.abc import Callable

import httpx

import durq
from dashboard.apps import build
from dashboard.support import LiveServer, running_worker

Serve = Callable[..., LiveServer]


def _csrf_from(page: httpx.Response) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found is not None
    return found.group(1)


def test_the_job_page_shows_progress_and_cancels_with_a_csrf_checked_post(
    redis_url: str, queue_name: str, serve: Serve
) -> None:
    with durq.Queue(queue_name, redis_url) as queue:
        queue.enqueue("x", expires=3600)
        job = queue.dequeue()
        assert job is not None
        queue.progress(job, 0.3, {"stage": "<resize>"})
        dash = serve(redis_url)
        with httpx.Client(base_url=dash.url) as client:
            page = client.get(f"/queue/job?q={queue_name}&id={job.id}")
            assert page.status_code == 200
            assert "30.0% at" in page.text
            assert "\\u003cresize\\u003e" in page.text  # escaped, never raw HTML
            assert "expires" in page.text and "Cancel job" in page.text
            form = {"q": queue_name, "id": job.id}
            assert client.post("/queue/job/cancel", data=form).status_code == 403
            assert client.get(f"/queue/job/cancel?q={queue_name}&id={job.id}").status_code == 405
            assert not queue.job(job.id).cancel_requested  # type: ignore[union-attr]

            done = client.post("/queue/job/cancel", data={**form, "csrf": _csrf_from(page)})
            assert done.status_code == 303
            assert done.headers["location"].endswith(
                f"/queue/job?q={queue_name}&id={job.id}&done=cancelling"
            )
            after = client.get(done.headers["location"])
            assert "its worker is stopping the job" in after.text
            assert "Cancel job" not in after.text
        assert queue.job(job.id).cancel_requested  # type: ignore[union-attr]
        assert queue.stats().cancelled == 0  # ends cancelled when its holder reports


def test_a_read_only_dashboard_offers_no_cancel(
    redis_url: str, queue_name: str, serve: Serve
) -> None:
    with durq.Queue(queue_name, redis_url) as queue:
        job_id = queue.enqueue("x").id
        dash = serve(redis_url, read_only=True)
        with httpx.Client(base_url=dash.url) as client:
            page = client.get(f"/queue/job?q={queue_name}&id={job_id}")
            assert "Cancel job" not in page.text
            refused = client.post("/queue/job/cancel", data={"q": queue_name, "id": job_id})
            assert refused.status_code == 403
        assert queue.stats().pending == 1


def test_the_job_page_shows_the_errors_of_its_last_failed_attempts(
    redis_url: str, queue_name: str, serve: Serve
) -> None:
    with durq.Queue(queue_name, redis_url) as queue:
        job_id = queue.enqueue("x", max_attempts=5).id
        for attempt in (1, 2):
            job = queue.dequeue()
            assert job is not None
            reason = {
                "type": "builtins.ValueError",
                "message": f"<bad> row {attempt}",
                "traceback": f'File "tasks.py", line {attempt}, in parse',
            }
            queue.requeue(job, reason=reason, delay=0)
        dash = serve(redis_url)
        with httpx.Client(base_url=dash.url) as client:
            page = client.get(f"/queue/job?q={queue_name}&id={job_id}")
    assert page.status_code == 200
    failures = page.text.split("Last failures", 1)[1]
    assert failures.index("&lt;bad&gt; row 1") < failures.index("&lt;bad&gt; row 2")
    assert "<bad>" not in page.text  # escaped, never raw HTML
    assert "line 1, in parse" in failures and "line 2, in parse" in failures


def test_the_job_page_of_a_finished_job_shows_its_summary_while_its_result_is_kept(
    redis_url: str, queue_name: str, serve: Serve
) -> None:
    # the issue: once a completed job's record was gone, the page had "no trace" of it
    app = build(redis_url)
    try:
        handle = app.tasks["echo"].options(queue=queue_name).enqueue("<b>hello</b>")
        with running_worker(app, queues=[queue_name]):
            assert handle.result(timeout=10) == "<b>hello</b>"
        dash = serve(redis_url)
        with httpx.Client(base_url=dash.url) as client:
            page = client.get(f"/queue/job?q={queue_name}&id={handle.id}")
    finally:
        app.close()
    assert page.status_code == 200, page.text
    finished = page.text.split("<h2>Finished</h2>", 1)[1].split("</section>", 1)[0]
    assert "<code>echo</code>" in finished
    for row in ("worker", "started", "finished", "ran", "arguments", "result"):
        assert f"<th>{row}</th>" in finished, finished
    assert "&lt;b&gt;hello&lt;/b&gt;" in finished and "<b>hello" not in page.text
    assert "<td>1 of 2</td>" in page.text  # attempts, from the summary
