"""Routing tasks to queues from one place: ``App(routes={...})``, where Celery has
``task_routes``.

A route maps a task's name, or a pattern (``fnmatch``: ``*``, ``?``, ``[...]``) of its
name or of its function's module and name (``shop.emails.*``), to a queue. The first
route that matches, in the mapping's order, decides a task's queue when it is declared;
a task declared with another ``queue=`` is refused then, so the two cannot disagree
silently. ``task.options(queue=...)`` still sends one job elsewhere.

A task with a rate of its own (``@app.task(rate=durq.Rate(...))``) gets a queue of its
own, ``<queue>.<task>``, whose rate is that one: the queues' limiter (GCRA on the
server's clock, for all workers together, docs/flow-control.md) is what limits it. Each
worker sets the rate when it starts, and a worker told to consume ``<queue>`` consumes
``<queue>.<task>`` too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fnmatch import fnmatchcase
from typing import Any

from durq.errors import InvalidArgument
from durq.keys import check_queue_name
from durq.limits import Rate

__all__ = ["Routes"]


class Routes:
    """An App's routes, checked when the App is made."""

    def __init__(self, routes: Mapping[str, str] | None) -> None:
        if routes is not None and not isinstance(routes, Mapping):
            raise InvalidArgument(
                f"routes must be a mapping of task names or patterns to queues, "
                f"not {type(routes).__name__}"
            )
        self.routes = {str(k): check_queue_name(v) for k, v in (routes or {}).items()}
        #: the queues of tasks with a rate of their own: queue -> (the task's queue, rate)
        self.rated: dict[str, tuple[str, Rate]] = {}

    def rated_queue(self, name: str, queue: str, rate: Any) -> str:
        """The queue of task ``name`` (declared for ``queue``) limited to ``rate``."""
        if not isinstance(rate, Rate):
            raise InvalidArgument(f"rate must be a durq.Rate, not {type(rate).__name__}")
        own = f"{queue}.{name}"
        try:
            check_queue_name(own)
        except InvalidArgument:
            raise InvalidArgument(
                f"task {name!r} cannot have a rate of its own: {own!r}, its queue, is not "
                "a valid queue name (give the task a simpler name=)"
            ) from None
        if self.rated.get(own, (queue, rate)) != (queue, rate):
            raise InvalidArgument(f"queue {own!r} already has another rate")
        self.rated[own] = (queue, rate)
        return own

    def consumed(self, queues: list[str]) -> list[str]:
        """``queues`` with the rated queues of their tasks (a worker's ``-q``)."""
        extra = [own for own, (base, _) in self.rated.items() if base in queues]
        return queues + [own for own in extra if own not in queues]

    def queue_of(self, name: str, fn: Callable[..., Any]) -> str | None:
        """The queue the first matching route gives task ``name`` (function ``fn``),
        or None."""
        if not self.routes:
            return None
        path = f"{getattr(fn, '__module__', '')}.{getattr(fn, '__name__', name)}"
        for pattern, queue in self.routes.items():
            if fnmatchcase(name, pattern) or fnmatchcase(path, pattern):
                return queue
        return None

    def decide(self, name: str, fn: Callable[..., Any], declared: str | None) -> str | None:
        """The routed queue of a task declared with ``declared`` (its ``queue=``), or
        None when no route matches; InvalidArgument when the two disagree."""
        routed = self.queue_of(name, fn)
        if routed is not None and declared is not None and declared != routed:
            raise InvalidArgument(
                f"task {name!r} is declared with queue={declared!r} but the App's routes "
                f"send it to {routed!r}: name the queue in one place"
            )
        return routed
