"""Checking a task's call arguments against its function's signature, at enqueue.

``Signature.bind`` costs microseconds per call, so a plain signature (positional-or-
keyword parameters only) is checked by counting, and the outcome is remembered per
argument shape (how many positional arguments, which keywords): a bulk enqueue checks
each shape once.
"""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["ArgumentCheck"]

#: distinct argument shapes whose signature check is remembered per task
_ARITY_CACHE = 256


class ArgumentCheck:
    """The signature check of one task's calls, remembered per argument shape.

    Args:
        name: the task's name, which starts each problem's wording.
        signature: the task function's signature.
    """

    def __init__(self, name: str, signature: inspect.Signature) -> None:
        self.name = name
        self.signature = signature
        self._simple = _simple_arity(signature)
        #: the check's outcome by argument shape: (count, *keyword names), or the count
        #: alone without keywords
        self.shapes: dict[int | tuple[Any, ...], str | None] = {}

    def _fits(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """A quick arity check for plain signatures (False: let bind() decide)."""
        if self._simple is None:
            return False
        names, required = self._simple
        given = len(args)
        if given > len(names):
            return False
        for name in kwargs:
            if name not in names or names.index(name) < given:
                return False
        return all(n in kwargs for n in names[given:required])

    def problem(self, args: Any, kwargs: Any) -> str | None:
        """Why ``args`` and ``kwargs`` do not fit the function's signature, or None."""
        if not isinstance(args, (list, tuple)) or not isinstance(kwargs, dict):
            return f"{self.name}(): arguments must be a list and a dict"
        # the outcome depends only on how many positional arguments and which keywords
        shape = (len(args), *kwargs) if kwargs else len(args)
        try:
            return self.shapes[shape]
        except KeyError:
            pass
        problem = None
        if not self._fits(tuple(args), kwargs):
            try:
                self.signature.bind(*args, **kwargs)
            except TypeError as exc:
                problem = f"{self.name}(): {exc}"
        if len(self.shapes) < _ARITY_CACHE:
            self.shapes[shape] = problem
        return problem


def _simple_arity(signature: inspect.Signature) -> tuple[tuple[str, ...], int] | None:
    """For a signature of positional-or-keyword parameters only: their names and how
    many come before the first default (Signature.bind costs microseconds per call)."""
    names: list[str] = []
    required = 0
    for param in signature.parameters.values():
        if param.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
            return None
        if param.default is inspect.Parameter.empty:
            if required != len(names):  # a required parameter after a default: bind() it
                return None
            required += 1
        names.append(param.name)
    return tuple(names), required
