"""A fast start (issue 33 point 6): `import durq`, `durq --help` and the commands load
only what they use; what a worker or a producer does not need stays out.

Each check runs in a fresh interpreter (this process has imported everything already).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# what no producer needs: the dashboard's web stack, the CLI's tables, tracing, metrics
HEAVY = ("rich", "starlette", "jinja2", "uvicorn", "opentelemetry", "prometheus_client")


def _modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    return set(json.loads(out.stdout.splitlines()[-1]))


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if n in modules or any(m.startswith(n + ".") for m in modules))


def test_import_durq_loads_no_library_and_none_of_durq_s_layers() -> None:
    modules = _modules_after("import durq")
    assert _loaded(modules, (*HEAVY, "click", "redis", "asyncio")) == []
    assert sorted(m for m in modules if m.startswith("durq.")) == ["durq._version"]


def test_every_name_of_durq_all_resolves_in_a_fresh_process() -> None:
    code = (
        "import durq\n"
        "missing = [n for n in durq.__all__ if getattr(durq, n, None) is None]\n"
        "assert not missing, missing\n"
        "from durq import *\n"
        "from durq import App, Queue, AsyncQueue, Retry, current_job\n"
    )
    _modules_after(code)


def test_a_producer_s_app_and_queue_load_neither_the_cli_nor_the_dashboard() -> None:
    modules = _modules_after("import durq\ndurq.App\ndurq.Queue\ndurq.AsyncQueue")
    # opentelemetry is left out of this list: redis-py imports its SDK when installed
    heavy = ("rich", "starlette", "jinja2", "uvicorn", "prometheus_client", "click")
    assert _loaded(modules, heavy) == []
    assert _loaded(modules, ("durq.cli", "durq.dashboard", "durq.worker")) == []


def test_durq_help_imports_no_command() -> None:
    modules = _modules_after(
        "from durq.cli import main\n"
        "try:\n"
        "    main(['--help'], prog_name='durq')\n"
        "except SystemExit:\n"
        "    pass"
    )
    assert _loaded(modules, (*HEAVY, "redis", "asyncio")) == []
    assert sorted(m for m in modules if m.startswith("durq.cli.")) == []


@pytest.mark.parametrize("command", ["stats", "workers", "job", "dlq"])
def test_an_admin_command_loads_neither_the_worker_nor_the_dashboard(command: str) -> None:
    modules = _modules_after(
        f"from durq.cli import main, COMMANDS\nimport click\n"
        f"main.get_command(click.Context(main), {command!r})"
    )
    assert _loaded(modules, ("starlette", "jinja2", "uvicorn", "prometheus_client")) == []
    assert _loaded(modules, ("durq.dashboard", "durq.worker.runner", "durq.dev")) == []


def test_the_worker_command_loads_neither_the_dashboard_nor_the_cli_s_tables() -> None:
    modules = _modules_after(
        "from durq.cli import main\nimport click\nmain.get_command(click.Context(main), 'worker')"
    )
    assert _loaded(modules, ("rich", "starlette", "jinja2", "uvicorn")) == []
    assert _loaded(modules, ("durq.dashboard", "durq.cli.admin", "durq.dev")) == []
    # the process pool's machinery is imported when a task runs there
    assert _loaded(modules, ("durq.worker.pool.pool", "durq.worker.pool.template")) == []


# redis-py imports OpenTelemetry's SDK where it is installed (as in the dev venv), and
# the SDK the tracing API: hidden here, as a user's install without the SDK has it
_NO_SDK = """
import sys
class _NoSdk:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[:2] == ["opentelemetry", "sdk"]:
            raise ModuleNotFoundError(name)
sys.meta_path.insert(0, _NoSdk())
"""


def test_without_a_tracer_provider_durq_never_imports_opentelemetry_s_tracing() -> None:
    modules = _modules_after(
        _NO_SDK + "import durq\nfrom durq.app import tracing\nimport durq.cli.worker\n"
        "assert not tracing.enabled()\nassert tracing.enqueue_meta('t', 'q') is None"
    )
    assert _loaded(modules, ("opentelemetry.trace", "opentelemetry.propagate")) == []
