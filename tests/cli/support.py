"""Running ``durq`` commands in-process with click's runner, as the quick CLI tests do."""

from __future__ import annotations

import logging

from click.testing import CliRunner, Result

from durq.cli import main
from worker.support import CompletedRun


def durq(*args: str, input: str | None = None, columns: int = 200) -> Result:
    """``durq ARGS...`` in this process, on a terminal ``columns`` wide; exceptions other
    than click's own propagate, with their tracebacks.

    ``durq worker`` configures the ``durq`` logger (a handler on the runner's stderr,
    which closes afterwards); that configuration is undone, for the tests that follow.
    """
    logger = logging.getLogger("durq")
    saved = (logger.handlers[:], logger.level, logger.propagate)
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


def table_row(output: str, first_cell: str) -> list[str]:
    """The cells of the table row of ``output`` that starts with ``first_cell``."""
    for line in output.splitlines():
        cells = line.replace("│", " ").split()
        if cells and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no row for {first_cell!r} in:\n{output}")


def durq_at(url: str, *args: str) -> CompletedRun:
    """``durq ARGS... --url URL`` in this process, as ``Durq.run`` reports a ``durq``
    process (which took 2-13 s a command on a loaded machine)."""
    done = durq(*args, "--url", url)
    return CompletedRun(done.exit_code, done.stdout, done.stderr)
