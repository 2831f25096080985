"""The process pool's error (here, so that a worker imports the pool's code only when
some task runs in it)."""

from __future__ import annotations

__all__ = ["PoolBroken"]


class PoolBroken(RuntimeError):
    """The process pool's template died: no child can be forked any more. The worker
    drains (the jobs of its children are given back without an attempt) and
    ``Worker.run`` raises this, so that its supervisor starts it afresh."""
