"""Several worker processes under one supervisor (``durq worker -p N``).

Each child is a full worker process (its own event loop and connections): forked from
the supervisor, which has imported the app (``forked``: no new interpreter, no second
import), or started from a command line (the Django command's children). Each runs in
its own process group so that a terminal's Ctrl-C reaches only the supervisor, which
forwards each signal once: the first drains the children, the second stops them. A
child that dies is restarted, with a growing pause if it keeps dying at start-up. If the
supervisor itself is killed, Linux sends its children SIGTERM, so they drain.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from durq._process import die_with_parent
from durq.worker.forked import ForkedChild

__all__ = ["SLOT_ENV", "Supervisor"]

SLOT_ENV = "DURQ_WORKER_SLOT"
"""Set to each child's number (0..count-1), e.g. to give each its own metrics port."""

log = logging.getLogger("durq.supervisor")


class _Child(Protocol):
    pid: int

    def poll(self) -> int | None: ...

    def send_signal(self, signum: int) -> None: ...


class Supervisor:
    """Keeps ``count`` child processes running: ``start(slot)`` in a forked child (its
    return value the exit code), or the command line ``start``.

    With ``burst`` (children that exit once the queues are drained), a child that exits
    with code 0 is done rather than restarted, and the supervisor returns when all are.
    """

    def __init__(
        self, start: Callable[[int], int] | Sequence[str], count: int, *, burst: bool = False
    ) -> None:
        self.start = start
        self.count = count
        self.burst = burst
        self.children: list[_Child | None] = [None] * count
        self._done = [False] * count
        self._started = [0.0] * count
        self._pause = [0.0] * count
        self._signals = 0
        self.restarts = 0

    def _spawn(self, slot: int) -> None:
        child: _Child
        if callable(self.start):
            target = self.start

            def run() -> int:
                os.environ[SLOT_ENV] = str(slot)
                return target(slot)

            child = ForkedChild(run)
        else:
            child = subprocess.Popen(
                list(self.start),
                start_new_session=True,
                preexec_fn=die_with_parent(signal.SIGTERM),
                env={**os.environ, SLOT_ENV: str(slot)},
            )
        self.children[slot] = child
        self._started[slot] = time.monotonic()
        log.info("started worker process %d (pid %d)", slot, child.pid)

    def _on_signal(self, signum: int, _frame: object) -> None:
        self._signals += 1
        for child in self.children:
            if child is not None and child.poll() is None:
                child.send_signal(signum)

    def run(self) -> int:
        """Run until a signal stops the children; returns an exit code."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        for slot in range(self.count):
            self._spawn(slot)
        while True:
            alive = 0
            for slot, child in enumerate(self.children):
                if child is None:
                    continue
                code = child.poll()
                if code is None:
                    alive += 1
                    continue
                if self._signals:
                    self.children[slot] = None
                    continue
                if self.burst and code == 0:
                    self.children[slot] = None
                    self._done[slot] = True
                    continue
                self._restart_later(slot, code)
            if (self._signals and alive == 0) or all(self._done):
                return 0
            self._respawn_due()
            time.sleep(0.1)

    def _restart_later(self, slot: int, code: int) -> None:
        quick = time.monotonic() - self._started[slot] < 5
        pause = min(max(self._pause[slot] * 2, 0.5), 30.0) if quick else 0.0
        log.warning(
            "worker process %d exited with %s; restarting%s",
            slot,
            code,
            f" in {pause:.1f}s" if pause else "",
        )
        self.children[slot] = None
        self._pause[slot] = pause
        self._started[slot] = time.monotonic() + pause  # when it is due
        self.restarts += 1

    def _respawn_due(self) -> None:
        now = time.monotonic()
        for slot, child in enumerate(self.children):
            due = now >= self._started[slot] and not self._done[slot]
            if child is None and not self._signals and due:
                self._spawn(slot)
