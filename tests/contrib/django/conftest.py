"""Fixtures of the Django tests: a fresh project per Django environment, with a worker."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from contrib.django.projects import Env, Project, django6_env, django52_env, running_project


@pytest.fixture(scope="session", params=["django5.2", "django6"])
def django_env(request: pytest.FixtureRequest) -> Env:
    """Each Django environment in turn: 5.2 + django-tasks here, 6 in its own venv."""
    return django52_env() if request.param == "django5.2" else django6_env()


@pytest.fixture(scope="session")
def django_project(
    django_env: Env, redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Project]:
    """A fresh project of ``django_env`` with a durq_worker running, on a namespace of
    its own on the shared server."""
    where: Path = tmp_path_factory.mktemp(f"project-{django_env.label}")
    namespace = f"dj-{secrets.token_hex(4)}"
    with running_project(django_env, where, redis_url, namespace) as project:
        yield project
