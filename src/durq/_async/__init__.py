"""Queues used from asyncio code (the asyncio front end).

This file is the source of truth; ``durq/_sync/__init__.py`` is generated from it by
``scripts/unasync.py`` (CI fails when they drift).
"""

from durq._async.queue import AsyncQueue
from durq._async.topic import AsyncTopic

__all__ = ["AsyncQueue", "AsyncTopic"]
