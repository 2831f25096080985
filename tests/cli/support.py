"""Running ``durq`` commands in-process with click's runner, as the quick CLI tests do."""

from __future__ import annotations

import logging
import sys

from click.testing import CliRunner, Result
from rich.console import Console

from durq.cli import main
from worker.support import CompletedRun


def durq(*args: str, input: str | None = None, columns: int = 200) -> Result:
    """``durq ARGS...`` in this process, on a terminal ``columns`` wide; exceptions other
    than click's own propagate, with their tracebacks.

    ``durq worker`` configures the ``durq`` logger (a handler on the runner's stderr,
    which closes afterwards); that configuration is undone, for the tests that follow.
    A command module's console reads COLUMNS once, when the module is first imported:
    the consoles imported already are set to ``columns`` (one test's 80 columns stayed
    for the next command, or the tests that followed, by the order they ran in).
    """
    logger = logging.getLogger("durq")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    for name, module in list(sys.modules.items()):
        console = getattr(module, "console", None)
        if name.startswith("durq.cli") and isinstance(console, Console):
            console.width = columns
    try:
        return CliRunner().invoke(
            main,
            list(args),
            prog_name="durq",
            input=input,
            env={"COLUMNS": str(columns)},
            catch_exceptions=False,
        )
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved


def durq_at(url: str, *args: str) -> CompletedRun:
    """``durq ARGS... --url URL`` in this process, as ``Durq.run`` reports a ``durq``
    process (which took 2-13 s a command on a loaded machine)."""
    done = durq(*args, "--url", url)
    return CompletedRun(done.exit_code, done.stdout, done.stderr)
