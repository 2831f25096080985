"""A throwaway PostgreSQL for the DBOS peer (``bench/peers/dbos.py``), started by its
driver: ``initdb`` into a temporary directory, the server on a free loopback port, one
database, and everything removed on ``close()``.

Its settings match the Valkey every other peer runs against (no persistence): ``fsync``,
``synchronous_commit`` and ``full_page_writes`` off, so DBOS is measured at its fastest
and the comparison is of the two designs, not of two disks. ``pg_stat_statements`` is
loaded so the bench can count the statements DBOS sends. PostgreSQL refuses to run as
root: as root the cluster is owned by the ``postgres`` system user (created, as
``durq-bench``, where there is none). Standard library only (it runs in the DBOS venv).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ENV_URL

BIN = Path(os.environ.get("BENCH_PG_BIN", "/usr/lib/postgresql/15/bin"))
DATABASE = "bench"
#: the settings of the bench's cluster, as the report states them
SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "300",
    "shared_preload_libraries": "pg_stat_statements",
}
SETTINGS_TEXT = (
    "PostgreSQL started by the bench (initdb in a temporary directory, loopback TCP), "
    "with fsync, synchronous_commit and full_page_writes off: no durability, like the "
    "Valkey server (no persistence)"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_as() -> str | None:
    """The user the cluster runs as: None (the current one) unless that is root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "durq-bench"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "durq-bench"],
        check=True,
        capture_output=True,
    )
    return "durq-bench"


def server_env() -> dict[str, str]:
    """The cluster's environment: the driver's without the run's server URL, which marks
    a run's worker processes for the orchestrator to kill when their driver is gone
    (driver_client.leftover_workers): the cluster belongs to the DBOS driver, alive."""
    return {k: v for k, v in os.environ.items() if k != ENV_URL}


def server_argv(data: Path, port: int, socket_dir: Path) -> list[str]:
    """The postgres command line: its settings, on loopback only."""
    argv = [str(BIN / "postgres"), "-D", str(data), "-c", "listen_addresses=127.0.0.1"]
    argv += ["-c", f"port={port}", "-c", f"unix_socket_directories={socket_dir}"]
    for key, value in SETTINGS.items():
        argv += ["-c", f"{key}={value}"]
    return argv


class Postgres:
    """One cluster: ``start()`` returns its database URL; ``close()`` removes it all."""

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.dir: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.user = run_as()

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{DATABASE}"

    def _run(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            argv, user=self.user, env=server_env(), check=True, capture_output=True, **kwargs
        )

    def start(self) -> str:
        if not (BIN / "postgres").exists():
            raise RuntimeError(f"no PostgreSQL binaries in {BIN} (BENCH_PG_BIN)")
        self.dir = Path(tempfile.mkdtemp(prefix="durq-bench-pg-"))
        if self.user:
            shutil.chown(self.dir, self.user)
        data = self.dir / "data"
        self._run([str(BIN / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                   "-E", "UTF8", "--no-sync"], timeout=120)  # fmt: skip
        self.port = free_port()
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            server_argv(data, self.port, self.dir),
            user=self.user,
            env=server_env(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + 60
        while True:
            ready = subprocess.run(
                [str(BIN / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port)],
                check=False,
            )
            if ready.returncode == 0:
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL did not start; see {self.log_path}")
            time.sleep(0.1)
        self.psql("postgres", f"CREATE DATABASE {DATABASE}")
        self.psql(DATABASE, "CREATE EXTENSION pg_stat_statements")
        return self.url

    def psql(self, database: str, sql: str) -> str:
        out = self._run([str(BIN / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U",
                         "postgres", "-d", database, "-At", "-v", "ON_ERROR_STOP=1", "-c", sql],
                        timeout=120)  # fmt: skip
        return out.stdout.decode().strip()

    def version(self) -> str:
        return self.psql("postgres", "SHOW server_version")

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGINT)  # the postmaster's fast shutdown
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
