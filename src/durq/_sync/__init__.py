"""Queues used from blocking code (the blocking front end).

GENERATED from durq/_async/__init__.py by scripts/unasync.py: edit that file.
"""

from durq._sync.queue import Queue
from durq._sync.topic import Topic

__all__ = ["Queue", "Topic"]
