"""The quickstart runs as written: its code blocks, taken from docs/quickstart.md, are
the reader's files, snippets and commands, against a server of the test's own.

A Python block whose first line is ``# PATH.py`` (or ``# PATH.py, continued``) is a file
of the reader's project; the other Python blocks run in order in one namespace, as in one
script; the ``durq`` lines of the shell blocks run as commands (the first ``durq worker``
in the background), except ``durq server`` and ``durq dashboard``, which serve until
stopped, and lines with a placeholder (``ID``).
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

from durq.dev.server import RedisServer
from worker.support import Durq

ROOT = Path(__file__).resolve().parents[2]
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)
_FILE = re.compile(r"# (\S+\.py)(, continued)?")
_SERVES = ("durq server", "durq dashboard")


def _guide(page: Path) -> tuple[dict[str, str], list[str], list[str]]:
    """The files, the Python snippets and the ``durq`` command lines of ``page``."""
    files: dict[str, str] = {}
    snippets: list[str] = []
    commands: list[str] = []
    for lang, code in _BLOCK.findall(page.read_text()):
        if lang == "python":
            named = _FILE.fullmatch(code.splitlines()[0])
            if named:
                files[named[1]] = files.get(named[1], "") + code
            else:
                snippets.append(code)
        elif lang == "bash":
            lines = (line.split(" #")[0].strip() for line in code.splitlines())
            commands += [line for line in lines if line.startswith("durq ")]
    return files, snippets, commands


def test_the_quickstarts_code_blocks_run_as_written(
    tmp_path: Path,
    durq_cli: Durq,
    make_server: object,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    files, snippets, commands = _guide(ROOT / "docs" / "quickstart.md")
    assert files and snippets and commands
    server: RedisServer = make_server()  # type: ignore[operator]
    for name, code in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(code)
    monkeypatch.setenv("DURQ_URL", server.url)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the reader's project, for the CLI
    monkeypatch.syspath_prepend(str(tmp_path))
    workers = [c for c in commands if c.startswith("durq worker")]
    worker = durq_cli.start(*shlex.split(workers[0])[1:], url=server.url)
    try:
        namespace: dict[str, object] = {}
        for code in snippets:
            exec(compile(code, "docs/quickstart.md", "exec"), namespace)
        assert "report for 2026-10" in capsys.readouterr().out
        for command in commands:
            if command.startswith(_SERVES) or command in workers or " ID" in command:
                continue
            done = durq_cli.run(*shlex.split(command)[1:], url=server.url)
            assert done.code == 0, f"{command}:\n{done.stdout}{done.stderr}"
    finally:
        worker.kill()
        for module in [m for m in sys.modules if m == "myapp" or m.startswith("myapp.")]:
            del sys.modules[module]
    assert "Traceback" not in worker.output(), worker.output()
