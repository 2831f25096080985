"""Versioned task arguments are checked when they are declared (``durq.app.versions``):
a bad version, a migration of a version that is not older, or one that is not callable
is an error at ``@app.task``, not in a worker; so is a bad ``unknown_task_grace``."""

from __future__ import annotations

from typing import Any

import pytest

import durq
from durq.app.versions import job_version, runnable_versions, upgrade


def _up(args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    return [*args, 1], kwargs


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"version": 0}, "version must be an integer from 1"),
        ({"version": True}, "version must be an integer from 1"),
        ({"version": "2"}, "version must be an integer from 1"),
        ({"version": 2, "migrate": {2: _up}}, "migrate keys are the versions it upgrades from"),
        ({"version": 2, "migrate": {0: _up}}, "migrate keys are the versions it upgrades from"),
        ({"version": 2, "migrate": {1: "not callable"}}, "must be callable"),
    ],
)
def test_a_bad_version_or_migration_is_refused_when_the_task_is_declared(
    options: dict[str, Any], message: str
) -> None:
    app = durq.App("redis://127.0.0.1:1/0")
    with pytest.raises(durq.InvalidArgument, match=message):

        @app.task(**options)
        def f(x: int) -> None: ...


def test_a_bad_unknown_task_grace_is_refused_by_the_app() -> None:
    with pytest.raises(durq.InvalidArgument):
        durq.App("redis://127.0.0.1:1/0", unknown_task_grace=-1)


def test_migrations_chain_and_a_gap_stops_the_chain() -> None:
    assert runnable_versions(3, {1: _up, 2: _up}) == (3, 2, 1)
    assert runnable_versions(3, {1: _up}) == (3,)  # version 2 has no migration: 1 cannot reach
    assert upgrade("f", {1: _up, 2: _up}, 1, 3, [0], {}) == ([0, 1, 1], {})


def test_a_migration_that_returns_something_else_than_args_and_kwargs_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"migrate\[1\] returned int"):
        upgrade("f", {1: lambda a, k: 5}, 1, 2, [], {})  # type: ignore[dict-item,return-value]


def test_a_job_without_a_version_is_version_one_and_a_bad_one_is_refused() -> None:
    assert job_version({}) == 1 and job_version({"v": 4}) == 4
    for bad in (0, True, "2", 1.5):
        with pytest.raises(ValueError):
            job_version({"v": bad})


def test_a_versioned_task_writes_its_version_and_an_unversioned_one_writes_none() -> None:
    app = durq.App("redis://127.0.0.1:1/0")

    @app.task
    def plain(x: int) -> None: ...

    @app.task(version=3, migrate={2: _up})
    def versioned(x: int, y: int) -> None: ...

    assert plain.version_meta is None and plain.versions == (1,)
    assert versioned.version_meta == {"v": 3} and versioned.versions == (3, 2)
    app.close()
