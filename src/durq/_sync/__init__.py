"""Queues used from blocking code (the blocking front end).

GENERATED from durq/_async/__init__.py by scripts/unasync.py: edit that file.
"""

from durq._sync.queue import Queue

__all__ = ["Queue"]
