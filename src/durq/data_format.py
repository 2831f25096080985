"""The format of durq's data in Redis, and which release writes what.

A format number names a layout of the records, keys and entries durq keeps;
``DATA_FORMAT`` is the one this tree writes. Each worker's heartbeat carries its durq
version and its format, so ``durq workers`` shows a fleet that mixes releases.

- **1**, durq 0.1.0 (``RELEASES``): records of 33-byte headers, schedules, workflows in
  one hash per workflow, limits, dead letters.
- **2**, durq 0.2: the same records (a held job stored as delayed with the flag
  ``FLAG_HELD``, which 0.1.0 ignores) and schedules; workflow
  runs and numbered start entries, a sharded queue's pause entries (``P``); the holding
  area (``caps``, ``held:<capability>``, ``heldidx``: ``lua/lib/holding/held.lua``); a
  task's version in a job's metadata (``v``, absent at version 1); a stored result
  may carry its job's summary (``job``: ``durq.worker.summary``), which a reader that
  does not know it ignores. It runs format 1's workflows on in their layout
  (``lua/lib/workflows/legacy.lua``), and while a live worker of format 1 consumes a
  workflow's queues, it submits the workflow in that layout (``durq.app.fleet``).
"""

from __future__ import annotations

__all__ = ["DATA_FORMAT"]

#: the format of the data this tree writes
DATA_FORMAT = 2
