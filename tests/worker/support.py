"""Running workers for tests: ``durq`` subprocesses, in-process Workers, execution logs.

Import as ``from worker.support import ...`` (``tests/`` is on sys.path).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import psutil
import pytest

import durq
from durq.worker import Worker, WorkerConfig, WorkerState
from durq.worker.handoff import run_worker
from helpers import eventually

TESTS_DIR = Path(__file__).resolve().parents[1]
APP_TARGET = "worker.apps:app"

_SCRIPT = Path(sys.executable).with_name("durq")
#: the ``durq`` console script of the interpreter running the tests
DURQ: list[str] = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "durq"]


def durq_env(url: str | None = None) -> dict[str, str]:
    """The environment of a ``durq`` subprocess: the test apps importable, ``DURQ_URL``
    set, wide tables, unbuffered output."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS_DIR), env.get("PYTHONPATH")) if p)
    if url is not None:
        env["DURQ_URL"] = url
    env["COLUMNS"] = "200"
    env["PYTHONUNBUFFERED"] = "1"
    return env


# ------------------------------------------------------------------------ execution logs


class ExecLog:
    """The execution log the test tasks append to (see ``worker.apps.record``)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __str__(self) -> str:
        return str(self.path)

    def events(self, event: str | None = None, key: str | None = None) -> list[dict[str, Any]]:
        """The recorded events, oldest first, optionally only of one kind and key."""
        try:
            lines = self.path.read_text().splitlines()
        except FileNotFoundError:
            return []
        out = [json.loads(line) for line in lines if line.strip()]
        return [
            e
            for e in out
            if (event is None or e["event"] == event) and (key is None or e["key"] == key)
        ]

    def count(self, event: str, key: str | None = None) -> int:
        """How many ``event`` lines (of ``key``) there are."""
        return len(self.events(event, key))

    def keys(self, event: str) -> list[str]:
        """The keys of every ``event`` line, in order (repeats included)."""
        return [e["key"] for e in self.events(event)]


# ------------------------------------------------------------------------ subprocesses


class DurqProcess:
    """A ``durq ...`` subprocess in its own session, its output in a file."""

    def __init__(self, args: list[str], env: dict[str, str], output: Path) -> None:
        self.args = args
        self.output_path = output
        with output.open("ab") as out:
            self.popen = subprocess.Popen(
                [*DURQ, *args],
                env=env,
                cwd=TESTS_DIR.parent,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def __repr__(self) -> str:
        return f"<durq {' '.join(self.args[:2])} pid={self.pid}>"

    @property
    def pid(self) -> int:
        return self.popen.pid

    def output(self) -> str:
        """Everything the process printed so far (stdout and stderr)."""
        try:
            return self.output_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def alive(self) -> bool:
        return self.popen.poll() is None

    def send(self, sig: int) -> None:
        self.popen.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL the process (and any children), and reap it."""
        for child in self.children():
            _kill_quietly(child.pid)
        if self.alive():
            self.popen.kill()
        self.popen.wait()

    def children(self) -> list[psutil.Process]:
        """Its living descendants (the worker processes of a supervisor)."""
        try:
            kids = psutil.Process(self.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        return [k for k in kids if running(k)]

    def wait(self, timeout: float) -> int:
        """Its exit code; fails the test (with its output) if it runs on past ``timeout``."""
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"{self!r} still running after {timeout:g} s; output:\n{self.output()}",
                pytrace=False,
            )

    def expect_output(self, text: str, timeout: float = 10.0) -> None:
        """Wait until ``text`` appears in its output."""
        eventually(
            lambda: text in self.output(),
            timeout,
            lambda: f"{text!r} in the output of {self!r}:\n{self.output()}",
        )


def running(proc: psutil.Process) -> bool:
    """True while ``proc`` exists and is not a zombie."""
    try:
        return bool(proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def _kill_quietly(pid: int) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


class Durq:
    """Starts ``durq`` subprocesses for one test and kills what is left at its end."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.started: list[DurqProcess] = []

    def start(self, *args: str, url: str | None = None) -> DurqProcess:
        """``durq ARGS...`` in the background, with ``durq_env(url)``."""
        output = self.tmp_path / f"durq-{len(self.started)}.log"
        proc = DurqProcess(list(args), durq_env(url), output)
        self.started.append(proc)
        return proc

    def worker(self, url: str, *queues: str, args: tuple[str, ...] = ()) -> DurqProcess:
        """``durq worker worker.apps:app -q QUEUE... --url URL ARGS...``, logging at
        INFO, with a fast heartbeat."""
        argv = ["worker", APP_TARGET, "--url", url, "--heartbeat", "0.2"]
        for queue in queues:
            argv += ["-q", queue]
        return self.start(*argv, *args, url=url)

    def run(self, *args: str, url: str | None = None, timeout: float = 30.0) -> CompletedRun:
        """``durq ARGS...`` to completion."""
        proc = subprocess.run(
            [*DURQ, *args],
            env=durq_env(url),
            cwd=TESTS_DIR.parent,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return CompletedRun(proc.returncode, proc.stdout, proc.stderr)

    def outputs(self) -> str:
        """The output of every process started, for failure messages."""
        return "\n".join(f"--- {p!r}\n{p.output()}" for p in self.started)

    def cleanup(self) -> None:
        for proc in self.started:
            proc.kill()


class CompletedRun:
    """What a finished ``durq`` command printed and returned."""

    def __init__(self, code: int, stdout: str, stderr: str) -> None:
        self.code = code
        self.stdout = stdout
        self.stderr = stderr

    def __repr__(self) -> str:
        return f"<exit {self.code}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}>"


# ------------------------------------------------------------------------ in-process workers


_LOOPS: weakref.WeakKeyDictionary[Worker, asyncio.AbstractEventLoop] = weakref.WeakKeyDictionary()


def request_stop(worker: Worker) -> None:
    """Ask a worker started by ``running_worker`` to stop (from the test's thread)."""
    _LOOPS[worker].call_soon_threadsafe(worker.stop)


@contextmanager
def running_worker(app: durq.App, **config: Any) -> Iterator[Worker]:
    """Run a Worker of ``app`` in a thread of its own (its own event loop, run as
    ``durq worker`` runs it) for the ``with`` block, then stop it gracefully and wait
    until it stopped."""
    config.setdefault("grace", 2.0)
    config.setdefault("heartbeat", 0.2)
    worker = Worker(app, WorkerConfig(**config), handle_signals=False)
    loop_box: list[asyncio.AbstractEventLoop] = []
    errors: list[BaseException] = []

    async def main() -> None:
        loop_box.append(asyncio.get_running_loop())
        _LOOPS[worker] = loop_box[0]
        await worker.run()

    def target() -> None:
        try:
            run_worker(main())  # as `durq worker` runs it (worker/handoff.py)
        except BaseException as exc:  # reported to the test below
            errors.append(exc)

    thread = threading.Thread(target=target, name="durq-test-worker", daemon=True)
    thread.start()
    eventually(
        lambda: worker.state is not WorkerState.STARTING or not thread.is_alive(),
        10.0,
        "the worker to start",
    )
    try:
        yield worker
    finally:
        if loop_box and thread.is_alive():
            loop_box[0].call_soon_threadsafe(worker.stop)
        thread.join(15.0)
        assert not thread.is_alive(), "the worker did not stop within 15 s"
        if errors:
            raise errors[0]
