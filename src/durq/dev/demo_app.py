"""The App that ``durq demo`` runs: thumbnails for uploads, and a slow report.

Its behaviour is deterministic from the arguments, so the demo tells the same story
each time: some uploads hit a transient storage error on their first attempt, one
upload is not an image at all, and the report is slow enough to be caught mid-job when
the demo kills a worker.
"""

from __future__ import annotations

import hashlib
import time

import durq

app = durq.App(lease=2.0, max_attempts=3, backoff=durq.fixed(0.5))


class StorageTimeout(Exception):
    """The (pretend) object store did not answer in time."""


@app.task(queue="uploads", timeout=10)
def make_thumbnail(user: str, upload: str) -> str:
    """Resize an upload: 0.1-0.3 s of work; a transient storage error on the first attempt
    of one upload in eight; a file that is not an image fails for good."""
    if upload.endswith(".exe"):
        raise durq.Fail(f"{upload} is not an image (it is an executable)")
    digest = hashlib.sha1(upload.encode()).digest()
    time.sleep(0.1 + digest[0] / 255 * 0.2)
    job = durq.current_job()
    if digest[1] % 8 == 0 and job is not None and job.attempt == 1:
        raise StorageTimeout(f"storage timed out while writing {upload}.thumb.png")
    return f"{upload}.thumb.png"


@app.task(queue="reports", timeout=30, result=True)
def build_report(name: str, seconds: float) -> str:
    """A slow job: the demo kills the worker that runs it, another one finishes it."""
    time.sleep(seconds)
    return f"report {name} ready"
