"""Worker processes of any durq installation (this tree's or a previous release's) and
the ledger their tasks write, for the deploy tests."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parents[1]


def env_for(extra: dict[str, str]) -> dict[str, str]:
    """A subprocess environment with ``tests/`` importable (and nothing of this tree's
    ``src`` forced on a previous release's interpreter)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(TESTS_DIR)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


@dataclass
class Proc:
    """One worker process, its output in a file."""

    popen: subprocess.Popen[bytes]
    log: Path
    label: str

    def output(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(10)

    def term(self, timeout: float = 15.0) -> int:
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
        return self.popen.wait(timeout)


class Fleet:
    """Starts and kills the worker processes of one test; all are killed at close."""

    def __init__(self, tmp_path: Path, env: dict[str, str]) -> None:
        self.tmp_path = tmp_path
        self.env = env
        self.procs: list[Proc] = []

    def spawn(
        self,
        python: Path | str,
        target: str,
        queues: Sequence[str],
        *,
        label: str,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> Proc:
        argv = [str(python), "-m", "durq", "worker", target]
        for queue in queues:
            argv += ["-q", queue]
        argv += ["-c", "10", "--lease", "1", "--grace", "2", "--heartbeat", "1", *args]
        log = self.tmp_path / f"worker-{len(self.procs)}-{label}.log"
        with log.open("ab") as out:
            popen = subprocess.Popen(
                argv,
                env=env_for({**self.env, **(env or {})}),
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.tmp_path,
            )
        proc = Proc(popen, log, label)
        self.procs.append(proc)
        return proc

    def wait_ready(self, proc: Proc, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while "consuming" not in proc.output():
            if not proc.alive():
                raise AssertionError(f"worker {proc.label} exited:\n{proc.output()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"worker {proc.label} not ready:\n{proc.output()}")
            time.sleep(0.05)

    def close(self) -> None:
        for proc in self.procs:
            if proc.alive():
                proc.kill()

    def logs(self) -> str:
        return "\n".join(f"--- {p.label}\n{p.output()[-3000:]}" for p in self.procs)


@dataclass(frozen=True)
class Line:
    kind: str
    seq: int
    id: str
    attempt: int
    pid: int
    version: str


def read_ledger(path: Path) -> list[Line]:
    """The ledger's lines; a torn last line (a writer killed mid-write) is skipped."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    lines = []
    for raw in text.splitlines():
        parts = raw.split()
        if len(parts) != 6:
            continue
        try:
            lines.append(
                Line(parts[0], int(parts[1]), parts[2], int(parts[3]), int(parts[4]), parts[5])
            )
        except ValueError:
            continue
    return lines


def done_seqs(path: Path) -> Counter[int]:
    """How many times each seq ran to its end."""
    return Counter(line.seq for line in read_ledger(path) if line.kind == "DONE")


def wait_for(what: str, check: object, timeout: float, fleet: Fleet | None = None) -> None:
    """Poll ``check()`` (a callable) until it is true; fail with the fleet's logs."""
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            logs = fleet.logs() if fleet is not None else ""
            raise AssertionError(f"timed out waiting for {what}\n{logs}")
        time.sleep(0.1)
