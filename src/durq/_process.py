"""Child processes that do not outlive their parent (Linux), for servers and workers."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from collections.abc import Callable

__all__ = ["die_with_parent"]

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """Return a preexec_fn asking Linux to send ``sig`` to the child when this process
    dies (None where that is not available).

    PR_SET_PDEATHSIG fires when the *thread* that forked exits, so it is only used from
    the main thread, whose exit is the process's exit.
    """
    if sys.platform != "linux" or threading.current_thread() is not threading.main_thread():
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()
    signum = int(sig)

    def set_parent_death_signal() -> None:
        prctl(_PR_SET_PDEATHSIG, signum)
        # the parent may have died between fork and prctl: then nobody would signal
        if os.getppid() != parent:
            os._exit(1)

    return set_parent_death_signal
