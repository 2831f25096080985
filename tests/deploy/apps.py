"""Two releases of one application, for the deploy tests run in this process: ``v1``
knows task ``u(x)``; ``v2`` adds task ``t(x)`` and changes ``u``'s signature to
``u(x, scale)`` at version 2, with a migration of version 1's arguments. Both record
what ran in ``Ran``."""

from __future__ import annotations

import threading
from typing import Any

import durq


class Ran:
    """The calls the tasks of both releases ran: (release, task, args), thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[str, str, tuple[Any, ...]]] = []

    def add(self, release: str, task: str, *args: Any) -> None:
        with self.lock:
            self.calls.append((release, task, args))

    def of(self, task: str) -> list[tuple[str, tuple[Any, ...]]]:
        with self.lock:
            return [(release, args) for release, t, args in self.calls if t == task]


def upgrade_u(args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """u's arguments of version 1 (x) as those of version 2 (x, scale)."""
    return [*args, 10], kwargs


def v1(url: str, queue: str, ran: Ran, **options: Any) -> durq.App:
    app = durq.App(url, default_queue=queue, **options)

    @app.task
    def u(x: int) -> None:
        ran.add("v1", "u", x)

    return app


def v2(url: str, queue: str, ran: Ran, *, migrate: bool = True, **options: Any) -> durq.App:
    app = durq.App(url, default_queue=queue, **options)

    @app.task
    def t(x: int) -> None:
        ran.add("v2", "t", x)

    @app.task(version=2, migrate={1: upgrade_u} if migrate else None)
    def u(x: int, scale: int) -> None:
        ran.add("v2", "u", x, scale)

    return app
