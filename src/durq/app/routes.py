"""Routing tasks to queues from one place: ``App(routes={...})``, where Celery has
``task_routes``.

A route maps a task's name, or a pattern (``fnmatch``: ``*``, ``?``, ``[...]``) of its
name or of its function's module and name (``shop.emails.*``), to a queue. The first
route that matches, in the mapping's order, decides a task's queue when it is declared;
a task declared with another ``queue=`` is refused then, so the two cannot disagree
silently. ``task.options(queue=...)`` still sends one job elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fnmatch import fnmatchcase
from typing import Any

from durq.errors import InvalidArgument
from durq.keys import check_queue_name

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
