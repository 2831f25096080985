"""Why a child died, in words a dead letter can carry.

A child the worker did not stop died by itself: a signal (SIGSEGV in a C extension,
SIGABRT from ``os.abort()``, a SIGKILL from the kernel's OOM killer) or an exit code
(``os._exit``). The job it ran fails with reason ``killed:<SIGNAL>`` or ``exited:<code>``
and is retried by its policy. A SIGKILL the worker did not send is most often the OOM
killer's: the cgroup's ``memory.events`` (cgroup v2) counts its kills, so a count that
grew since the last look says so.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

__all__ = ["OomKills", "death_fields", "signal_name"]


def signal_name(signum: int) -> str:
    """``SIGSEGV`` for 11; ``SIG<n>`` for a number without a name."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"SIG{signum}"


def _cgroup_events() -> Path | None:
    """This process's cgroup v2 ``memory.events``, if there is one."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("0::"):
            path = Path("/sys/fs/cgroup") / line[3:].lstrip("/") / "memory.events"
            return path if path.exists() else None
    return None


class OomKills:
    """The OOM killer's kills counted in this process's cgroup (cgroup v2)."""

    def __init__(self) -> None:
        self._path = _cgroup_events()
        self._seen = self._count()

    def _count(self) -> int:
        if self._path is None:
            return 0
        try:
            for line in self._path.read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def grew(self) -> bool:
        """True when the count grew since the last look."""
        now = self._count()
        grew, self._seen = now > self._seen, now
        return grew


def death_fields(status: int | None, oom: OomKills) -> dict[str, Any]:
    """The failure of a job whose child died by itself with wait status ``status``
    (None: unknown)."""
    if status is None:
        return {"reason": "killed", "message": "the child process running it died"}
    if os.WIFSIGNALED(status):
        name = signal_name(os.WTERMSIG(status))
        message = f"the child process running it died of {name}"
        if name == "SIGKILL":
            if oom.grew():
                message += " from the kernel's OOM killer (its cgroup counted an oom_kill)"
            else:
                message += ", which the worker did not send (the kernel's OOM killer?)"
        return {"reason": f"killed:{name}", "message": message}
    code = os.waitstatus_to_exitcode(status)
    message = f"the child process running it exited with code {code}"
    return {"reason": f"exited:{code}", "message": message}
