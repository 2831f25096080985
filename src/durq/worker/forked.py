"""A child process forked to run a function: the worker processes of ``durq worker -p N``.

The supervisor has imported the app already, so a forked worker starts without a new
interpreter or a second import of the app and durq (the cost of a start, issue 33).
Fork only from a process without threads or an event loop: the supervisor forks before
it starts either. The child gets a session of its own (a terminal's Ctrl-C reaches only
the supervisor) and SIGTERM when its parent dies, like the re-executed children had.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn

from durq._process import die_with_parent

__all__ = ["ForkedChild"]

_FORWARDED = (signal.SIGTERM, signal.SIGINT)


class ForkedChild:
    """A forked process running ``target()``, whose return value is its exit code; the
    ``pid``/``poll``/``send_signal`` part of ``subprocess.Popen`` the supervisor uses."""

    def __init__(self, target: Callable[[], int]) -> None:
        die = die_with_parent(signal.SIGTERM)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()  # or the child would write the parent's buffered output again
        # the parent's handlers (the supervisor's) must not run in the child before it
        # puts back the defaults: signals wait until then
        old = signal.pthread_sigmask(signal.SIG_BLOCK, _FORWARDED)
        pid = os.fork()
        if pid == 0:
            _run_child(target, die, old)
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit code (negative: the signal that killed it), or None while it runs."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: its code is lost
                self.returncode = 1
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)


def _run_child(
    target: Callable[[], int], die: Callable[[], None] | None, mask: set[int | signal.Signals]
) -> NoReturn:
    code = 1
    try:
        os.setsid()
        if die is not None:
            die()
        for sig in _FORWARDED:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        code = target()
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed pipe: nothing more to say
                stream.flush()
        # not sys.exit: the parent's stack (the supervisor's loop, the CLI) is not the
        # child's to unwind, nor its atexit handlers to run
        os._exit(code)


def _exit_code(code: object) -> int:
    """What ``SystemExit(code)`` makes a process exit with."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
