"""The App the dashboard tests run: tasks that succeed, fail on demand, or take a while.

A worker runs it in a thread of the test process (``support.running_worker``) or as
``durq worker dashboard.apps:app`` (``tests/`` on PYTHONPATH), so ``BROKEN`` only
works in-process.
"""

from __future__ import annotations

import time

from opentelemetry import trace

import durq

BROKEN: set[str] = set()
"""Labels whose jobs fail for good (``durq.Fail``) while they are in the set."""


class UpstreamError(Exception):
    """A pretend failure of a remote service."""


def build(url: str | None = None) -> durq.App:
    """A new App with the test tasks registered (queue ``default`` unless told)."""
    app = durq.App(url, max_attempts=2, backoff=durq.fixed(0.05))

    @app.task(result=True)
    def echo(label: str, seconds: float = 0.0) -> str:
        """Return ``label`` after ``seconds``."""
        if seconds:
            time.sleep(seconds)
        return label

    @app.task
    def fragile(label: str) -> str:
        """Fail for good while ``label`` is in ``BROKEN``; succeed otherwise."""
        if label in BROKEN:
            raise durq.Fail(f"{label} is broken")
        return label

    @app.task
    def crash(label: str) -> None:
        """Always raise (a traceback ends in the dead letters after the attempts)."""
        raise UpstreamError(f"upstream refused {label}")

    @app.task
    def traced(label: str) -> str:
        """Make a span of its own: it joins the job's trace (the tracing tests)."""
        with trace.get_tracer("tests").start_as_current_span(f"inside {label}"):
            return label

    @app.task
    def charge(card_number: str) -> None:
        """Always refuse, with a message that does not repeat the argument."""
        raise ValueError("card declined")

    @app.task(queue="emails")
    def send_email(to: str, subject: str) -> None:
        """A few milliseconds of work; addresses at bounce.example fail."""
        time.sleep(0.005 + (hash(subject) % 20) / 1000)
        if to.endswith("@bounce.example"):
            raise UpstreamError(f"550 mailbox unavailable: {to}")

    @app.task(queue="imports")
    def import_rows(tenant: str, batch: int, seconds: float = 0.4) -> int:
        """A slow import batch of one tenant."""
        time.sleep(seconds)
        return batch

    @app.task(queue="thumbnails")
    def make_thumbnail(upload: str, seconds: float = 0.05) -> str:
        """Resize an upload."""
        time.sleep(seconds)
        return upload + ".thumb.png"

    return app


app = build()
