"""Fixtures of the CLI tests: those of the worker tests."""

from worker.fixtures import app, durq_cli, exec_log

__all__ = ["app", "durq_cli", "exec_log"]
