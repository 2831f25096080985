"""Fresh Django projects with durq as their task backend, in real interpreters.

Two environments, the same tests:

- ``django5.2``: the interpreter running the tests (Python 3.11 here) with Django 5.2 and
  the ``django-tasks`` backport, from the ``dev`` extra;
- ``django6``: Django 6 in a Python 3.12+ venv built once into ``.venv-django6/`` at the
  repository root (gitignored) and reused while its stamp matches.

Under CI an environment that cannot be had fails the tests instead of skipping them.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helpers import in_ci

ROOT = Path(__file__).resolve().parents[3]
TEMPLATES = Path(__file__).with_name("project")
DJANGO6_VENV = ROOT / ".venv-django6"
DJANGO6_REQUIREMENT = "django>=6,<7"


@dataclass(frozen=True)
class Env:
    """An interpreter with Django and durq importable."""

    label: str
    python: str

    def run(self, *args: str, cwd: Path, timeout: float = 120, **kwargs: Any) -> str:
        done = subprocess.run(
            [self.python, *args], cwd=cwd, capture_output=True, text=True,
            timeout=timeout, env=_env(), **kwargs,
        )  # fmt: skip
        if done.returncode != 0:
            raise AssertionError(
                f"{self.label}: {' '.join(args)} exited {done.returncode}\n"
                f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
            )
        return str(done.stdout)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE",)}
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("PYTHONPATH", None)  # the project's own directory is what it imports from
    return env


def unavailable(reason: str) -> None:
    """Skip locally; fail under CI, where both Django environments must run."""
    if in_ci():
        pytest.fail(f"{reason} (failing instead of skipping because CI is set)", pytrace=False)
    pytest.skip(reason)


# -- finding a Python >= 3.12 for Django 6 -----------------------------------------------


def _version(python: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run(
            [python, "-c", "import sys, venv, ensurepip; print(*sys.version_info[:2])"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    major, minor = out.stdout.split()
    return int(major), int(minor)


def python_candidates() -> list[str]:
    """Interpreters to try, in order: named ones on PATH, then pyenv's versions."""
    names = ["python3.14", "python3.13", "python3.12", "python3"]
    found = [p for p in (shutil.which(n) for n in names) if p]
    roots = {os.environ.get("PYENV_ROOT", ""), str(Path.home() / ".pyenv"), "/root/.pyenv"}
    for root in sorted(r for r in roots if r):
        found += sorted(glob.glob(f"{root}/versions/3.1[2-9]*/bin/python3"), reverse=True)
    found += sorted(glob.glob("/usr/local/bin/python3.1[2-9]"), reverse=True)
    return list(dict.fromkeys(found))


def find_python312() -> str | None:
    """The first interpreter that is Python 3.12 or newer and can make venvs."""
    for candidate in python_candidates():
        version = _version(candidate)
        if version is not None and version >= (3, 12):
            return candidate
    return None


def _stamp(python: str) -> str:
    """What the cached venv was built from: the interpreter, Django's requirement and
    durq's dependencies (durq itself is installed editable, so code changes need none)."""
    text = f"{python}\n{DJANGO6_REQUIREMENT}\n{(ROOT / 'pyproject.toml').read_text()}"
    return hashlib.sha256(text.encode()).hexdigest()


def django6_env() -> Env:
    """The Django 6 venv, built on first use (under a lock) and reused afterwards."""
    python = find_python312()
    if python is None:
        unavailable(
            "Django 6 needs Python >= 3.12 and none was found on PATH or under pyenv "
            f"(tried {python_candidates() or 'nothing'})"
        )
        raise AssertionError("unreachable")
    venv_python = DJANGO6_VENV / "bin" / "python"
    stamp_file = DJANGO6_VENV / ".durq-stamp"
    stamp = _stamp(python)
    with open(ROOT / ".venv-django6.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (stamp_file.exists() and stamp_file.read_text() == stamp
                and venv_python.exists()):  # fmt: skip
            shutil.rmtree(DJANGO6_VENV, ignore_errors=True)
            subprocess.run([python, "-m", "venv", str(DJANGO6_VENV)], check=True, timeout=300)
            subprocess.run(
                [str(venv_python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                 DJANGO6_REQUIREMENT, "-e", str(ROOT)],
                check=True, timeout=900,
            )  # fmt: skip
            stamp_file.write_text(stamp)
    return Env("django6", str(venv_python))


def django52_env() -> Env:
    """This interpreter, with Django 5.2 and django-tasks from the dev extra."""
    try:
        import django
        import django_tasks  # noqa: F401
    except ImportError as exc:
        unavailable(f"Django 5.2 with django-tasks is not installed here: {exc}")
        raise AssertionError("unreachable") from None
    if django.VERSION[:2] >= (6, 0):
        pytest.skip("this interpreter has Django 6: the django6 environment covers it")
    return Env("django5.2", sys.executable)


# -- a project ------------------------------------------------------------------------


@dataclass
class Project:
    """A fresh project (``startproject proj``, ``startapp shop``) on its own namespace."""

    env: Env
    path: Path
    worker: subprocess.Popen[bytes] | None = None

    def drive(self, scenario: str, *args: str, timeout: float = 90) -> dict[str, Any]:
        """Run ``drive.py SCENARIO ARGS...`` in the project; its JSON findings."""
        try:
            out = self.env.run("drive.py", scenario, *args, cwd=self.path, timeout=timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nworker log:\n{self.worker_log()}") from None
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return result

    def worker_log(self) -> str:
        log = self.path / "worker.log"
        return log.read_text()[-5000:] if log.exists() else ""

    def start_worker(self, *args: str) -> None:
        with open(self.path / "worker.log", "ab") as log:
            self.worker = subprocess.Popen(
                [self.env.python, "manage.py", "durq_worker", "-c", "2", "--heartbeat", "1",
                 "--grace", "5", *args],
                cwd=self.path, stdout=log, stderr=subprocess.STDOUT, env=_env(),
            )  # fmt: skip

    def stop_worker(self) -> None:
        if self.worker is not None and self.worker.poll() is None:
            self.worker.send_signal(signal.SIGTERM)
            try:
                self.worker.wait(15)
            except subprocess.TimeoutExpired:
                self.worker.kill()
                self.worker.wait(5)


SETTINGS = """

# -- added by tests/contrib/django/projects.py --
import durq

ALLOWED_HOSTS = ["*"]
INSTALLED_APPS += ["durq.contrib.django", "shop"]
# the worker and the test's driver write to one SQLite file: wait for its lock rather
# than fail after SQLite's default 5 s on a loaded machine
DATABASES["default"]["OPTIONS"] = {{"timeout": 30}}
TASKS = {{
    "default": {{
        "BACKEND": "durq.contrib.django.DurqBackend",
        "QUEUES": ["default"],
        "OPTIONS": {{"url": {url!r}, "namespace": {namespace!r}, "backoff": durq.fixed(0.2)}},
    }}
}}
"""


def create_project(env: Env, where: Path, url: str, namespace: str) -> Project:
    """``django-admin startproject`` + ``startapp``, the test app's files, migrations."""
    where.mkdir(parents=True, exist_ok=True)
    env.run("-m", "django", "startproject", "proj", ".", cwd=where)
    env.run("manage.py", "startapp", "shop", cwd=where)
    for name in ("models.py", "apps.py", "tasks.py", "views.py", "urls.py"):
        shutil.copy(TEMPLATES / name, where / "shop" / name)
    shutil.copy(TEMPLATES / "drive.py", where / "drive.py")
    settings = where / "proj" / "settings.py"
    settings.write_text(settings.read_text() + SETTINGS.format(url=url, namespace=namespace))
    urls = where / "proj" / "urls.py"
    text = urls.read_text().replace("import path", "import include, path")
    urls.write_text(text + "\nurlpatterns.append(path('', include('shop.urls')))\n")
    env.run("manage.py", "makemigrations", "shop", "-v", "0", cwd=where)
    env.run("manage.py", "migrate", "-v", "0", cwd=where)
    return Project(env, where)


@contextlib.contextmanager
def running_project(env: Env, where: Path, url: str, namespace: str) -> Iterator[Project]:
    """A project with a durq_worker running for it (stopped with SIGTERM after)."""
    project = create_project(env, where, url, namespace)
    project.start_worker()
    try:
        yield project
    finally:
        project.stop_worker()
