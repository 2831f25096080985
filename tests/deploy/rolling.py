"""The App of the rolling-deploy test in two releases, for worker processes
(``durq worker deploy.rolling:app`` with ``$DURQ_ROLL_RELEASE`` v1 or v2) and for the
test's producers (``build``).

- v1: ``u(seq)`` and ``w(seq)``;
- v2: adds ``t(seq)``; ``u(seq, scale)`` at version 2, version-1 jobs migrated with
  scale 10; ``w(seq)`` unchanged.

Every run appends ``release task seq scale attempt`` to the ledger (``$DURQ_ROLL_LEDGER``)
with one ``os.write`` on an ``O_APPEND`` descriptor.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import durq

_fd: int | None = None


def _note(release: str, task: str, seq: int, scale: int) -> None:
    global _fd
    if _fd is None:
        _fd = os.open(os.environ["DURQ_ROLL_LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    job = durq.current_job()
    attempt = job.attempt if job is not None else 0
    os.write(_fd, f"{release} {task} {seq} {scale} {attempt}\n".encode())


def upgrade_u(args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    return [*args, 10], kwargs


def build(release: str, url: str | None, queue: str) -> durq.App:
    app = durq.App(url, default_queue=queue, lease=1.0, max_attempts=20)

    @app.task
    async def w(seq: int) -> None:
        await asyncio.sleep(0.02)
        _note(release, "w", seq, 0)

    if release == "v1":

        @app.task
        async def u(seq: int) -> None:
            await asyncio.sleep(0.02)
            _note(release, "u", seq, 0)

    else:

        @app.task
        async def t(seq: int) -> None:
            await asyncio.sleep(0.02)
            _note(release, "t", seq, 0)

        @app.task(name="u", version=2, migrate={1: upgrade_u})
        async def u2(seq: int, scale: int) -> None:
            await asyncio.sleep(0.02)
            _note(release, "u", seq, scale)

    return app


app = (
    build(
        os.environ["DURQ_ROLL_RELEASE"], os.environ["DURQ_ROLL_URL"], os.environ["DURQ_ROLL_QUEUE"]
    )
    if "DURQ_ROLL_RELEASE" in os.environ
    else None
)
