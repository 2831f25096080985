"""Resident memory of a process: the figure a memory limit compares.

The current resident set (``/proc/<pid>/statm`` on Linux, psutil elsewhere when
installed), not the peak (``ru_maxrss``, which never falls: Celery's
``max_memory_per_child`` reads it, so a child that freed its memory still counts as
large). Reading statm costs a few microseconds; a child keeps its own file open and
reads it after each job.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["SelfRss", "available", "rss"]

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_LINUX = sys.platform == "linux"


def _psutil() -> Any:
    try:
        import psutil
    except ImportError:
        return None
    return psutil


def available() -> bool:
    """True when resident memory can be read here (a memory limit can be kept)."""
    return _LINUX or _psutil() is not None


def rss(pid: int) -> int | None:
    """The resident bytes of process ``pid`` now; None when it is gone (or unreadable)."""
    if _LINUX:
        try:
            with open(f"/proc/{pid}/statm", "rb") as f:
                return int(f.read().split()[1]) * _PAGE
        except (OSError, ValueError, IndexError):
            return None
    psutil = _psutil()
    if psutil is None:
        return None
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except (psutil.Error, OSError):
        return None


class SelfRss:
    """This process's resident bytes, read cheaply again and again (a kept file)."""

    def __init__(self) -> None:
        self._fd: int | None = None
        if _LINUX:
            try:
                self._fd = os.open("/proc/self/statm", os.O_RDONLY)
            except OSError:
                self._fd = None

    def read(self) -> int:
        """Resident bytes now (0 when unknown)."""
        if self._fd is not None:
            try:
                return int(os.pread(self._fd, 128, 0).split()[1]) * _PAGE
            except (OSError, ValueError, IndexError):
                return 0
        return rss(os.getpid()) or 0
