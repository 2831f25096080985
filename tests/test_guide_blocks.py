"""The README's and the user guides' durq code runs as written: each of their Python
blocks runs against a server of the test's own (a newcomer's first check). The
quickstart's blocks run in tests/cli/test_quickstart.py, the Django tutorial's in
tests/contrib/django/; design.md, guarantees.md, scripts.md, decisions/ and reference/
are reference pages, not guides.

Rules (each guide says them to its reader where it needs them):

- A block runs on its own, after the page's setup: ``import durq``, ``url`` (the
  reader's Redis URL) and ``app = durq.App(url)``; ``redis://localhost:6379/0`` in a
  block, and ``$DURQ_URL`` (which ``durq.App()`` reads), are the test's server;
  ``$DURQ_DASHBOARD_TOKEN`` is set. Top-level ``await`` works, as in ``python -m asyncio``.
- A block in another library's tab (``=== "Celery"``, ``"RQ"``, ``"arq"``) is that
  library's code: not run here.
- A block whose first line is ``# fragment: ...`` shows part of a program (the comment
  says what it leaves out: your own objects, a worker running): it is compiled, not run,
  and the names of durq it uses (``durq.X``, ``from durq.M import X``) must exist.
- A block whose first line is ``# examples/PATH`` is a copy of that file, which its own
  test runs (tests/test_guides.py checks the copy): it is compiled here.
- A block that imports a library durq does not install (``sentry_sdk``, an
  OpenTelemetry exporter) runs where that library is installed; elsewhere it is compiled.

And every page's ``durq`` commands (a code span or a shell block's line that begins with
``durq``) name commands and options that the CLI has.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import importlib.util
import inspect
import re
import textwrap
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import click
import pytest

import durq
from durq.cli import main as cli
from durq.dev.server import RedisServer

ROOT = Path(__file__).resolve().parents[1]
GUIDES = [
    "README.md",
    "docs/batches.md",
    "docs/deployment.md",
    "docs/durable.md",
    "docs/flow-control.md",
    "docs/hooks.md",
    "docs/index.md",
    "docs/job-control.md",
    "docs/operations.md",
    "docs/process-pool.md",
    "docs/schedules.md",
    "docs/security.md",
    "docs/workflows.md",
    "docs/tutorials/fastapi.md",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs" / "migrating").glob("*.md")),
]
_TAB = re.compile(r'^=== "([^"]+)"', re.MULTILINE)
_BLOCK = re.compile(r"^( *)```python\n(.*?)^\1```", re.MULTILINE | re.DOTALL)
_LOCAL = "redis://localhost:6379/0"


def _blocks(text: str) -> list[tuple[int, str]]:
    """(line, code) of each durq Python block of a page (another library's tab left
    out)."""
    out = []
    for block in _BLOCK.finditer(text):
        tabs = list(_TAB.finditer(text, 0, block.start()))
        tab = tabs[-1][1] if tabs and block[1] else "durq"
        if tab == "durq":
            out.append((text.count("\n", 0, block.start()) + 2, textwrap.dedent(block[2])))
    return out


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is absent
        return False


def _runnable(code: str) -> bool:
    """Whether a block runs here (else it is compiled only: see the module's rules)."""
    if code.startswith(("# fragment:", "# examples/")):
        return False
    imported: list[str] = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            imported += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.append(node.module)
    return all(_installed(name) for name in imported)


def _missing(code: str) -> list[str]:
    """The names of durq a block uses that durq does not have (``durq.X``, ``from durq.M
    import X``): what a block compiled only would otherwise not show."""
    missing = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "durq" and not hasattr(durq, node.attr):
                missing.append(f"durq.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "durq":
            module = importlib.import_module(node.module or "")
            missing += [
                f"{node.module}.{a.name}" for a in node.names if not hasattr(module, a.name)
            ]
    return missing


def _run(code: str, where: str, url: str) -> None:
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    compiled = compile(code.replace(_LOCAL, url), where, "exec", flags=flags)
    if missing := _missing(code):
        raise AttributeError(f"durq has no {', '.join(missing)}")
    if not _runnable(code):
        return
    setup = durq.App(url)
    namespace: dict[str, object] = {"durq": durq, "url": url, "app": setup}

    def apps() -> list[durq.App]:  # the page's setup too, when a block made its own app
        made = [value for value in namespace.values() if isinstance(value, durq.App)]
        return made if setup in made else [setup, *made]

    async def awaited(done: Coroutine[Any, Any, Any]) -> None:
        try:
            await done
        finally:
            for app in apps():
                await app.aclose()  # its asyncio clients, on the loop they ran on

    try:
        done = eval(compiled, namespace)
        if inspect.iscoroutine(done):
            asyncio.run(awaited(done))
    finally:
        for app in apps():
            app.close()
        for queue in namespace.values():
            if isinstance(queue, durq.Queue):
                queue.close()


@pytest.mark.parametrize("page", GUIDES)
def test_a_guides_durq_code_blocks_run_as_written(
    page: str, make_server: Callable[..., RedisServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = _blocks((ROOT / page).read_text())
    assert blocks, f"{page}: no durq block"  # a stale entry of GUIDES
    url = make_server().url  # a server per guide: a sharded "emails" is no other's queue
    monkeypatch.setenv("DURQ_URL", url)
    monkeypatch.setenv("DURQ_DASHBOARD_TOKEN", "a-token-of-the-readers")
    failed = []
    for line, code in blocks:
        try:
            _run(code, f"{page}:{line}", url)
        except Exception as exc:
            failed.append(f"{page}:{line}: {type(exc).__name__}: {exc}")
    assert not failed, "\n".join(failed)


_SPAN = re.compile(r"`(durq [^`]+)`")
_FENCE = re.compile(r"^ *```(\w*)")
_SHELLS = ("", "bash", "sh", "shell", "console")


def _commands(text: str) -> list[tuple[int, str]]:
    """(line, command) of each ``durq`` command of a page: a code span that begins with
    ``durq``, and a line of a shell block that does (its comment and pipes left out)."""
    out = []
    fence: str | None = None  # the language of the block the line is in, if any
    for number, line in enumerate(text.splitlines(), 1):
        if opened := _FENCE.match(line):
            fence = opened[1] if fence is None else None
        elif fence is None:
            out += [(number, span[1]) for span in _SPAN.finditer(line)]
        elif fence in _SHELLS and line.lstrip("$ ").startswith("durq "):
            out.append((number, re.split(r" #| \||&&|;", line.lstrip("$ "))[0]))
    return out


def _unknown(command: str) -> str | None:
    """What of ``command`` the CLI does not have: a subcommand or an option (placeholders
    such as ``ID``, ``[-q QUEUE]``, ``list/show`` and ``...`` are left as they are)."""
    found: click.Command = cli
    words = command.split()[1:]
    while isinstance(found, click.Group) and words and words[0][0].islower():
        if found.name == "job" and words[0] not in found.commands:  # durq job ID: show
            break
        context = click.Context(found)
        subcommands = [found.get_command(context, n) for n in words[0].split("/")]  # list/show
        if None in subcommands:
            return f"no command {words[0]!r}"
        found, words = subcommands[0] or found, words[1:]
    known = {"-h", "--help"}
    params = list(found.params)
    if isinstance(found, click.Group) and found.name == "job":  # durq job ID -q QUEUE
        params += found.commands["show"].params
    for param in params:
        known.update(param.opts)
        known.update(param.secondary_opts)
    options = [word.strip("[]").split("=")[0] for word in words if word.lstrip("[").startswith("-")]
    unknown = [
        option for option in options if option not in known and option.lstrip("-")[:1].isalpha()
    ]
    return f"no option {unknown}" if unknown else None


@pytest.mark.parametrize(
    "page",
    ["README.md", *(str(p.relative_to(ROOT)) for p in sorted((ROOT / "docs").rglob("*.md")))],
)
def test_the_durq_commands_and_options_a_page_shows_exist(page: str) -> None:
    commands = _commands((ROOT / page).read_text())
    wrong = [f"{page}:{line}: {c!r}: {why}" for line, c in commands if (why := _unknown(c))]
    assert not wrong, "\n".join(wrong)
