"""``App(routes={...})``: tasks routed to queues from one place, as Celery's
``task_routes`` (the issue: no central routing)."""

from __future__ import annotations

import pytest

import durq
from worker.support import running_worker


def test_routes_send_each_task_to_its_queue_by_name_pattern_or_dotted_path(
    redis_url: str, queue_name: str
) -> None:
    emails, reports = f"{queue_name}-emails", f"{queue_name}-reports"
    app = durq.App(
        redis_url,
        default_queue=queue_name,
        routes={"send_*": emails, f"{__name__}.build_*": reports},
    )

    @app.task
    def send_welcome(to: str) -> None: ...

    @app.task(result=True)
    def build_report(month: str) -> str:
        return f"report {month}"

    @app.task(queue=emails)  # the same queue as its route: accepted
    def send_receipt(to: str) -> None: ...

    @app.task
    def other() -> None: ...

    assert (send_welcome.queue, build_report.queue, send_receipt.queue) == (emails, reports, emails)
    assert other.queue == queue_name  # no route: the app's default queue
    assert send_welcome.enqueue("ada@example.com").queue == emails
    moved = send_welcome.options(queue=queue_name).enqueue("bob@example.com")  # per job
    assert moved.queue == queue_name
    assert app.queue(emails).stats().pending == 1
    handle = build_report.enqueue("2026-11")
    with running_worker(app, queues=[reports]):
        assert handle.result(timeout=10) == "report 2026-11"
    app.close()


def test_a_task_whose_queue_disagrees_with_its_route_or_a_bad_route_is_refused(
    redis_url: str,
) -> None:
    app = durq.App(redis_url, routes={"send_*": "emails"})
    with pytest.raises(durq.InvalidArgument, match="routes send it to 'emails'"):

        @app.task(queue="default")
        def send_welcome(to: str) -> None: ...

    app.close()
    with pytest.raises(durq.InvalidArgument):
        durq.App(redis_url, routes={"send_*": "bad queue name {"})
    with pytest.raises(durq.InvalidArgument, match="routes must be a mapping"):
        durq.App(redis_url, routes=[("send_*", "emails")])  # type: ignore[arg-type]
