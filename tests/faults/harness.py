"""The fault-injection harness: worker processes to kill and producers that keep a
ledger (``faults.ledger``); ``faults.checker`` classifies every job at the end, and
``faults.scene`` sets a case up. ``Fleet.fencing_alarms`` checks that each refusal a
worker logged as a lost lease was one (the job was handed out again).
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from faults.app import LEDGER_ENV, QUEUE_ENV
from faults.ledger import LedgerView
from faults.producer import LedgerFile, Seconds, produce
from helpers import eventually, in_ci

TESTS_DIR = Path(__file__).resolve().parents[1]
REPO_DIR = TESTS_DIR.parent
APP_TARGET = "faults.app:app"
FAKETIME_LIBS = (
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
)


def faketime_library() -> str:
    """The libfaketime preload library; skip the test without it (fail under CI)."""
    for path in FAKETIME_LIBS:
        if os.path.exists(path):
            return path
    reason = "libfaketime is not installed (Debian package `faketime`): clock-skew case skipped"
    if in_ci():
        pytest.fail(f"{reason} (failing instead of skipping because CI is set)", pytrace=False)
    pytest.skip(reason)


def skewed(offset: int) -> dict[str, str]:
    """The environment of a process whose clocks run ``offset`` seconds off (every
    clock, CLOCK_REALTIME and CLOCK_MONOTONIC alike, through libfaketime)."""
    return {"LD_PRELOAD": faketime_library(), "FAKETIME": f"{offset:+d}s"}


def python_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a test subprocess: ``tests/`` importable, unbuffered."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS_DIR), env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def run_producer(
    url: str, queue: str, ledger: Path, *args: str, env: dict[str, str] | None = None
) -> None:
    """``python -m faults.producer --url URL --queue Q --ledger PATH ARGS...`` to its end."""
    argv = [sys.executable, "-m", "faults.producer", "--url", url, "--queue", queue]
    done = subprocess.run(
        [*argv, "--ledger", str(ledger), *args],
        env=python_env(env),
        cwd=REPO_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"producer {args} failed ({done.returncode}):\n{done.stderr}")


# --------------------------------------------------------------------------- producers


class Producer(threading.Thread):
    """``faults.producer.produce`` in a thread; ``stop()`` ends it after its current call."""

    def __init__(
        self,
        url: str,
        queue: str,
        ledger: Path,
        seqs: Sequence[int],
        *,
        name: str = "p",
        batch: int = 1,
        pause: float = 0.0,
        seconds: Seconds | None = None,
        delay: Seconds | None = None,
        task: str = "mark",
    ) -> None:
        super().__init__(name=f"producer-{name}", daemon=True)
        self.args = (url, queue, seqs)
        self.options: dict[str, Any] = {
            "name": name,
            "batch": batch,
            "pause": pause,
            "seconds": seconds,
            "delay": delay,
            "task": task,
        }
        self.ledger = ledger
        self.halt = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        ledger = LedgerFile(str(self.ledger))
        try:
            produce(*self.args[:2], ledger, self.args[2], stop=self.halt, **self.options)
        except BaseException as exc:  # reported by finish()
            self.error = exc
        finally:
            ledger.close()

    def stop(self) -> None:
        self.halt.set()

    def finish(self, timeout: float = 30.0) -> None:
        """Wait for the thread; fail the test if it crashed or hangs."""
        self.join(timeout)
        if self.is_alive():
            pytest.fail(f"{self.name} still running after {timeout:g} s", pytrace=False)
        if self.error is not None:
            raise AssertionError(f"{self.name} crashed: {self.error!r}") from self.error


# ----------------------------------------------------------------------------- workers


_REFUSED = re.compile(r"of job (\S+) on \S+ refused \(\w+\): its lease had expired")


class WorkerProc:
    """One ``durq worker faults.app:app`` process, its output in a file."""

    def __init__(self, popen: subprocess.Popen[bytes], log: Path, label: str) -> None:
        self.popen = popen
        self.log = log
        self.label = label
        self.started = time.time()
        self.killed_at: float | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def __repr__(self) -> str:
        return f"<worker {self.label} pid={self.pid}>"

    def output(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def alive(self) -> bool:
        return self.popen.poll() is None

    def ready(self) -> bool:
        """It logged that it is consuming."""
        return "consuming" in self.output()


class Fleet:
    """Starts, kills and stops the worker processes of one test."""

    def __init__(
        self,
        tmp_path: Path,
        url: str,
        queue: str,
        ledger: Path,
        *,
        concurrency: int = 10,
        lease: float = 1.0,
        args: Sequence[str] = (),
    ) -> None:
        self.tmp_path = tmp_path
        self.url = url
        self.queue = queue
        self.ledger = ledger
        self.concurrency = concurrency
        self.lease = lease
        self.args = list(args)
        self.procs: list[WorkerProc] = []

    def spawn(
        self,
        *,
        url: str | None = None,
        env: dict[str, str] | None = None,
        concurrency: int | None = None,
        label: str = "",
    ) -> WorkerProc:
        """Start a worker (``url``: e.g. through a proxy; ``env``: e.g. LD_PRELOAD)."""
        argv = [
            sys.executable, "-m", "durq", "worker", APP_TARGET,
            "-q", self.queue,
            "-c", str(concurrency or self.concurrency),
            "--url", url or self.url,
            "--lease", str(self.lease),
            "--grace", "2",
            "--heartbeat", "1",
            *self.args,
        ]  # fmt: skip
        full_env = python_env({LEDGER_ENV: str(self.ledger), QUEUE_ENV: self.queue, **(env or {})})
        index = len(self.procs)
        log = self.tmp_path / f"worker-{index}.log"
        with log.open("ab") as out:
            popen = subprocess.Popen(
                argv,
                env=full_env,
                cwd=REPO_DIR,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        proc = WorkerProc(popen, log, label or str(index))
        self.procs.append(proc)
        return proc

    def kill(self, proc: WorkerProc) -> float:
        """SIGKILL ``proc`` and reap it; returns the time of the kill."""
        at = time.time()
        if proc.alive():
            proc.popen.send_signal(signal.SIGKILL)
        proc.popen.wait()
        proc.killed_at = at
        return at

    def alive(self) -> list[WorkerProc]:
        return [p for p in self.procs if p.alive()]

    def wait_ready(self, procs: Iterable[WorkerProc], timeout: float = 30.0) -> None:
        procs = list(procs)
        eventually(lambda: all(p.ready() for p in procs), timeout, self.outputs)

    def stop(self, limit: float = 8.0) -> float:
        """SIGTERM every live worker and wait; each must drain and exit within ``limit``
        seconds (the queue is drained by then: nothing runs, nothing is left to send).
        Returns the longest stop."""
        live = self.alive()
        began = time.monotonic()
        for proc in live:
            proc.popen.send_signal(signal.SIGTERM)
        slow = []
        for proc in live:
            try:
                proc.popen.wait(max(began + limit - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                slow.append(proc)
        longest = time.monotonic() - began
        for proc in slow:
            proc.popen.kill()
            proc.popen.wait()
        if slow:
            pytest.fail(f"{slow} did not stop within {limit} s of SIGTERM:\n{self.outputs()}",
                        pytrace=False)  # fmt: skip
        return longest

    def close(self) -> None:
        """Kill whatever still runs (test teardown)."""
        for proc in self.procs:
            if proc.alive():
                proc.popen.kill()
            proc.popen.wait()

    def killed_pids(self) -> dict[int, float]:
        return {p.pid: p.killed_at for p in self.procs if p.killed_at is not None}

    def grep(self, text: str) -> int:
        """How many lines of all worker outputs contain ``text``."""
        return sum(1 for p in self.procs for line in p.output().splitlines() if text in line)

    def fencing_alarms(self, view: LedgerView) -> tuple[int, list[str]]:
        """The workers' warnings that an acknowledgement was refused because the job had
        been handed out again, and those among them that are false: the job never had a
        later delivery than the warning worker's own runs of it."""
        latest: dict[str, int] = {}
        mine: dict[tuple[int, str], int] = {}
        for r in view.runs:
            if r.kind == "START":
                latest[r.id] = max(latest.get(r.id, 0), r.delivery)
                # the earliest of its own runs: a refusal is true if any delivery of the
                # job came after it (the log line does not say which run it was about)
                mine[(r.pid, r.id)] = min(mine.get((r.pid, r.id), r.delivery), r.delivery)
        count, false = 0, []
        for p in self.procs:
            for line in p.output().splitlines():
                found = _REFUSED.search(line)
                if found:
                    count += 1
                    job_id = found.group(1)
                    if latest.get(job_id, 0) <= mine.get((p.pid, job_id), 0):
                        false.append(line)
        return count, false

    def outputs(self, tail: int = 40) -> str:
        parts = []
        for p in self.procs:
            lines = p.output().splitlines()[-tail:]
            state = "alive" if p.alive() else f"exit {p.popen.returncode}"
            parts.append(f"--- {p!r} ({state})\n" + "\n".join(lines))
        return "\n".join(parts)


def jitter(mean: float, spread: float, rng: random.Random) -> float:
    return max(0.05, rng.uniform(mean - spread, mean + spread))
