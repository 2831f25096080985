"""The worker processes of ``durq worker -p N``, forked from the supervisor
(durq.worker.forked): exit codes, signals, and what they inherit."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from durq.lua.functions import library
from durq.worker.forked import ForkedChild
from durq.worker.startup import prepare_processes
from helpers import eventually


def _code(child: ForkedChild) -> int:
    eventually(lambda: child.poll() is not None, 10, "the child to exit")
    code = child.poll()
    assert code is not None
    return code


def _sleeps() -> int:
    time.sleep(60)
    return 0


def test_a_forked_child_exits_with_what_its_function_returns() -> None:
    assert _code(ForkedChild(lambda: 3)) == 3
    assert _code(ForkedChild(lambda: 0)) == 0


def test_system_exit_and_exceptions_in_the_child_become_its_exit_code() -> None:
    def exits(code: object) -> int:
        raise SystemExit(code)

    def fails() -> int:
        raise RuntimeError("boom")

    assert _code(ForkedChild(lambda: exits(5))) == 5
    assert _code(ForkedChild(lambda: exits(None))) == 0
    assert _code(ForkedChild(lambda: exits("a message"))) == 1
    assert _code(ForkedChild(fails)) == 1


def test_a_child_killed_by_a_signal_reports_it_as_a_negative_code() -> None:
    child = ForkedChild(_sleeps)
    child.send_signal(signal.SIGKILL)
    assert _code(child) == -signal.SIGKILL
    child.send_signal(signal.SIGTERM)  # to a reaped child: nothing happens


def test_the_parent_s_signal_handlers_never_run_in_the_child(tmp_path: Path) -> None:
    mark = tmp_path / "handled"

    def handler(_signum: int, _frame: object) -> None:
        mark.write_text(str(os.getpid()))

    old = signal.signal(signal.SIGTERM, handler)
    try:
        child = ForkedChild(_sleeps)
        time.sleep(0.2)
        child.send_signal(signal.SIGTERM)
        assert _code(child) == -signal.SIGTERM  # the default action, not the handler
    finally:
        signal.signal(signal.SIGTERM, old)
    assert not mark.exists()


def test_a_child_forked_after_prepare_processes_has_the_library_made() -> None:
    prepare_processes()
    child = ForkedChild(lambda: 0 if library.cache_info().currsize == 1 else 1)
    assert _code(child) == 0
