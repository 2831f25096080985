"""Fixtures of the worker tests: the test App, an execution log, durq subprocesses."""

from worker.fixtures import app, bapp, durq_cli, exec_log

__all__ = ["app", "bapp", "durq_cli", "exec_log"]
