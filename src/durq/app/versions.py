"""Versioned task arguments: ``@app.task(version=2, migrate={1: upgrade_v1})``.

Every job carries the version of the task that enqueued it (in its payload's metadata,
``{"v": 2}``; none for version 1, so a task that never declares a version writes the
payloads it always did). A worker whose task is at version ``V`` runs a job of version
``v``:

- ``v == V``: as it is;
- ``v < V`` when ``migrate`` leads up from ``v``: its arguments pass through
  ``migrate[v]``, ``migrate[v + 1]``, ... ``migrate[V - 1]`` first, each
  ``(args, kwargs) -> (args, kwargs)``;
- otherwise (a newer version, or an older one no migration reaches) it does not run it:
  the job waits in the holding area for a worker that can (``durq.protocol.holding``).

Enqueue-time argument checks use the producer's own signature, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from durq.errors import InvalidArgument

__all__ = [
    "MAX_VERSION",
    "Migration",
    "check_migrations",
    "job_version",
    "runnable_versions",
    "upgrade",
]

#: a migration: the arguments of one version to those of the next
Migration: TypeAlias = Callable[[list[Any], dict[str, Any]], tuple[Any, Any]]

#: the highest version a task may declare (a job's version is one JSON integer)
MAX_VERSION = 1_000_000


def check_migrations(
    version: int, migrate: Mapping[int, Migration] | None
) -> Mapping[int, Migration]:
    """``migrate`` checked against ``version`` when the task is declared: every key an
    older version (1 <= key < version), every value callable."""
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= MAX_VERSION:
        raise InvalidArgument(
            f"version must be an integer from 1 to {MAX_VERSION}, not {version!r}"
        )
    checked: dict[int, Migration] = {}
    for old, fn in (migrate or {}).items():
        if isinstance(old, bool) or not isinstance(old, int) or not 1 <= old < version:
            raise InvalidArgument(
                f"migrate keys are the versions it upgrades from (1 to {version - 1}), not {old!r}"
            )
        if not callable(fn):
            raise InvalidArgument(
                f"migrate[{old}] must be callable (args, kwargs) -> (args, kwargs)"
            )
        checked[old] = fn
    return checked


def runnable_versions(version: int, migrate: Mapping[int, Migration]) -> tuple[int, ...]:
    """The versions of jobs a task at ``version`` runs: its own, and each older one from
    which its migrations lead up to it without a gap (newest first)."""
    found = [version]
    older = version - 1
    while older in migrate:
        found.append(older)
        older -= 1
    return tuple(found)


def job_version(meta: Mapping[str, Any]) -> int:
    """The version a job's metadata says (1 when it says none); ValueError for one that
    is not a version."""
    v = meta.get("v", 1)
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_VERSION:
        raise ValueError(f"the job's version {v!r} is not a version")
    return v


def upgrade(
    task: str,
    migrate: Mapping[int, Migration],
    version: int,
    target: int,
    args: list[Any],
    kwargs: dict[str, Any],
) -> tuple[list[Any], dict[str, Any]]:
    """The arguments of a job of ``version`` upgraded to ``target`` through the
    migrations; ValueError naming the step when one returns something else than
    ``(args, kwargs)`` (its own exceptions pass through)."""
    while version < target:
        out = migrate[version](list(args), dict(kwargs))
        if (
            not isinstance(out, (tuple, list))
            or len(out) != 2
            or not isinstance(out[0], (list, tuple))
            or not isinstance(out[1], Mapping)
        ):
            raise ValueError(
                f"{task}: migrate[{version}] returned {type(out).__name__}, not (args, kwargs)"
            )
        args, kwargs = list(out[0]), dict(out[1])
        version += 1
    return args, kwargs
