"""The previous release of durq, installed from this repository's own history.

``RELEASES`` (at the repository's root) lists the releases, oldest first, as ``version
commit``. The upgrade tests need the newest one as a separate installation: its tree is
taken with ``git archive`` of that commit and pip-installed into a virtual environment
kept in a cache directory (``$DURQ_RELEASE_CACHE``, default ``.cache/releases`` in the
repository), so only the first run pays for the install (about 20-60 s); later runs find
it ready. Tags are not used: a clone's tags cannot be relied on, its history can.

A shallow clone lacks the release's commit: nothing is fetched, the test fails and says
how to get the history.
"""

from __future__ import annotations

import fcntl
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_DIR = Path(__file__).resolve().parents[2]
RELEASES_FILE = REPO_DIR / "RELEASES"
CACHE_ENV = "DURQ_RELEASE_CACHE"
_INSTALL_TIMEOUT = 600  # seconds: a cold pip cache on a slow machine


@dataclass(frozen=True)
class Release:
    """A release listed in ``RELEASES``."""

    version: str
    commit: str


def releases() -> list[Release]:
    """Every release in ``RELEASES``, oldest first."""
    found = []
    for line in RELEASES_FILE.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            version, commit = line.split()
            found.append(Release(version, commit))
    return found


def previous_release() -> Release:
    """The newest release: the one this tree must upgrade from."""
    return releases()[-1]


def _git(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(REPO_DIR), *args], capture_output=True, check=False)


def _require_commit(release: Release) -> None:
    if _git("cat-file", "-e", f"{release.commit}^{{commit}}").returncode == 0:
        return
    shallow = _git("rev-parse", "--is-shallow-repository").stdout.strip() == b"true"
    pytest.fail(
        f"the commit of release {release.version} ({release.commit}) is not in this clone's "
        f"history{' (a shallow clone)' if shallow else ''}: the upgrade test installs the "
        "previous release from the repository's own history. Fetch it with "
        "`git fetch --unshallow` (or clone without --depth).",
        pytrace=False,
    )


def release_python(release: Release) -> Path:
    """The Python interpreter of a virtual environment where ``release`` is installed
    (built on first use, then taken from the cache)."""
    cache = Path(os.environ.get(CACHE_ENV) or REPO_DIR / ".cache" / "releases")
    home = cache / f"durq-{release.version}-{release.commit[:12]}"
    python = home / "venv" / "bin" / "python"
    ready = home / "ready"
    if ready.exists():
        return python
    _require_commit(release)
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f".{home.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test process may be building it
        if ready.exists():
            return python
        shutil.rmtree(home, ignore_errors=True)
        source = home / "src"
        source.mkdir(parents=True)
        subprocess.run(
            f"git -C {shlex.quote(str(REPO_DIR))} archive --format=tar {release.commit} "
            f"| tar -x -C {shlex.quote(str(source))}",
            shell=True,
            check=True,
        )
        subprocess.run([sys.executable, "-m", "venv", str(home / "venv")], check=True)
        installed = subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", str(source)],
            capture_output=True,
            text=True,
            timeout=_INSTALL_TIMEOUT,
            check=False,
        )
        if installed.returncode != 0:
            pytest.fail(
                f"could not install durq {release.version} into {home}:\n{installed.stderr}",
                pytrace=False,
            )
        check = subprocess.run(
            [str(python), "-c", "import durq; print(durq.__version__)"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert check.stdout.strip() == release.version, check.stdout
        ready.write_text(release.commit + "\n")
    return python
