"""A busy namespace for the screenshots: imports fair-shared between tenants, a stream
of emails with some bounces, thumbnails, scheduled reports."""

from __future__ import annotations

import time

import durq


def seed(app: durq.App) -> None:
    """Jobs that wait: tenant imports (a group per tenant, one at a time each) and
    reports scheduled for later."""
    app.queue("imports").configure(group_limit=1)
    imports = app.tasks["import_rows"]
    calls = [
        imports.options(group=f"tenant-{t:03d}").call(f"tenant-{t:03d}", b, 0.3 + (t % 4) / 10)
        for t in range(1, 61)
        for b in range(3 + (t * 37) % 90)
    ]
    imports.enqueue_many(calls)
    report = app.tasks["echo"]
    report.enqueue_many(
        [report.options(queue="reports", delay=3600).call(f"r{i}") for i in range(42)]
    )


def stream(app: durq.App, seconds: float) -> None:
    """Emails and thumbnails at a steady pace for ``seconds``; one email in 25 bounces."""
    email = app.tasks["send_email"]
    thumb = app.tasks["make_thumbnail"]
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        batch = []
        for _ in range(12):
            n += 1
            to = f"user{n}@bounce.example" if n % 25 == 0 else f"user{n}@example.com"
            batch.append(email.call(to, f"Your receipt #{n}"))
        email.enqueue_many(batch)
        thumb.enqueue_many([thumb.call(f"upload-{n}-{i}.jpg", 0.02 * (i % 5)) for i in range(4)])
        time.sleep(0.1)
