"""The orchestrator's side of ``bench/driver.py``: one peer's driver process, asked
one JSON command at a time with a deadline, and killed with its workers when it fails."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import BENCH_DIR, ENV_URL, LOGS_DIR, PeerMeta, descendants, env_python


class DriverError(Exception):
    pass


def leftover_workers(url: str) -> set[int]:
    """Worker processes of this run whose driver is gone: every process carrying this
    run's server URL in its environment (drivers pass theirs on) that is not a driver.
    Only called when a driver is replaced or closed, when no other peer has workers
    running (one peer measures at a time, and a driver stops its workers after each
    command). Linux (/proc) only; elsewhere none are found."""
    mark = f"{ENV_URL}={url}".encode()
    found = set()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if mark in env and b"driver.py" not in cmdline and int(entry.name) != os.getpid():
            found.add(int(entry.name))
    return found


class Driver:
    """One peer's driver process; every call has a deadline."""

    def __init__(self, meta: PeerMeta, url: str, python: str | None = None) -> None:
        """Start ``bench/driver.py`` for ``meta`` with ``python`` (default: the peer's venv's;
        ``bench/drain_ab.py`` passes a wrapper that runs another durq tree)."""
        self.meta = meta
        self.url = url
        LOGS_DIR.mkdir(parents=True, exist_ok=True)
        self.stderr = (LOGS_DIR / f"{meta.name}.driver.log").open("ab")
        env = dict(os.environ)
        env[ENV_URL] = url
        env["PYTHONUNBUFFERED"] = "1"
        env.pop("PYTHONPATH", None)
        self.proc = subprocess.Popen(
            [python or str(env_python(meta)), str(BENCH_DIR / "driver.py"), meta.module],
            cwd=BENCH_DIR,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            start_new_session=True,
        )
        self._buf = b""
        self._read(60.0)  # "ready"

    def _read(self, timeout: float) -> Any:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise DriverError(f"timed out after {timeout:g} s")
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    self.kill()
                    raise DriverError(
                        f"driver exited (code {self.proc.wait()}); see "
                        f"{LOGS_DIR / (self.meta.name + '.driver.log')}"
                    )
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        reply = json.loads(line)
        if not reply.get("ok"):
            raise DriverError(reply.get("error", "unknown error"))
        return reply.get("result")

    def call(self, cmd: str, timeout: float, **kwargs: Any) -> Any:
        assert self.proc.stdin is not None
        if self.proc.poll() is not None:
            raise DriverError("driver is not running")
        try:
            self.proc.stdin.write((json.dumps({"cmd": cmd, **kwargs}) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            self.kill()
            raise DriverError("driver exited") from None
        return self._read(timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(Exception):
                assert self.proc.stdin is not None
                self.proc.stdin.write(b'{"cmd": "quit"}\n')
                self.proc.stdin.flush()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(20.0)
        self.kill()

    def children(self) -> set[int]:
        """Worker processes the driver started (each leads its own process group)."""
        try:
            out = subprocess.run(["ps", "-A", "-o", "pid=,ppid="], capture_output=True, text=True)
        except OSError:
            return set()
        kids = set()
        for line in out.stdout.splitlines():
            pid, ppid = (int(x) for x in line.split())
            if ppid == self.proc.pid:
                kids.add(pid)
        return kids

    def kill(self) -> None:
        # Find the driver's worker groups (and every process below them: a supervisor's
        # children may have sessions of their own) before the driver dies and they get
        # reparented; if it died first (a crash, the OOM killer), find them by this run's
        # server URL.
        alive = self.proc.poll() is None
        groups = self.children() if alive else leftover_workers(self.url)
        tree = descendants([self.proc.pid]) if alive else groups
        for pgid in [self.proc.pid, *groups]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        for pid in tree:  # pool children of a worker lead no group of their own
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5.0)
        self.stderr.close()
