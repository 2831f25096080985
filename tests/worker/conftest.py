"""Fixtures of the worker tests: the test App, an execution log, durq subprocesses."""

from worker.fixtures import app, durq_cli, exec_log

__all__ = ["app", "durq_cli", "exec_log"]
