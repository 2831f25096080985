"""Fixtures of the flow-control tests: ``durq`` worker processes (see worker.fixtures)."""

from worker.fixtures import durq_cli

__all__ = ["durq_cli"]
