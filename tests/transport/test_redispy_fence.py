"""The fence's edges: ``scripts/check_redispy_fence.py`` (run by ``make check``) reports every
kind of use of redis-py's internals outside ``durq/transport/redispy.py``, and the redis-py
versions durq supports are the same in the pin, the Makefile's test matrix and the fence's
docstring."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
import redis

from durq.transport import redispy

ROOT = Path(__file__).resolve().parents[2]


def _load_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "check_redispy_fence", ROOT / "scripts" / "check_redispy_fence.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


check = _load_check()
FLAGGED = check.flagged_names()
STATE = check.state_names()


def _problems(source: str) -> list[str]:
    return list(check.check_source(source, FLAGGED, STATE))


@pytest.mark.parametrize(
    "source",
    [
        "import redis._parsers.hiredis",
        "from redis._parsers.hiredis import NOT_ENOUGH_DATA",
        "from redis.asyncio.connection import _AsyncHiredisParser",
        "def f(conn):\n    return conn._sock.recv(1)",
        "def f(conn):\n    return conn._parser",
        "def f(parser):\n    return len(parser._buffer)",
        "def f(conn):\n    return getattr(conn, '_writer', None)",
        "def f(client):\n    return client._initialize",
        "def f(pool):\n    return pool._lock",
        "def f(pool):\n    return pool.__dict__['durq_idle']",
        "def f(pool):\n    return vars(pool).setdefault('durq_scripts', {})",
        "def f(pool):\n    return 'durq_idle' in pool.__dict__",
        "def f(pool):\n    pool.durq_sentinels_asked = 1.0",
        "def f(pool):\n    return getattr(pool, 'durq_sentinels_asked', 0.0)",
        # a subclass of redis-py's reaches its internals through self
        (
            "from redis import sentinel\n"
            "base = sentinel.SentinelConnectionPool\n"
            "class Pool(base):\n"
            "    def f(self):\n"
            "        return self._lock"
        ),
    ],
)
def test_the_check_reports_each_kind_of_use_of_redis_pys_internals(source: str) -> None:
    assert len(_problems(source)) == 1, source


@pytest.mark.parametrize(
    "source",
    [
        "import redis\nfrom redis.exceptions import ConnectionError",
        "class Queue:\n    def f(self):\n        return self._lock, self._client",
        "def f(queue):\n    return queue._run",  # durq's own private name
        "def f(backend):\n    return backend.durq_app",  # a durq attribute, not state
        "def f(record):\n    return record.__dict__.get('job_id')",
        "from durq.transport import redispy\n"
        "def f(pool):\n    return redispy.attached(pool).get(redispy.IDLE)",
    ],
)
def test_the_check_leaves_durqs_own_names_alone(source: str) -> None:
    assert _problems(source) == []


@pytest.mark.lint  # make check runs it on the tree (27 s; 90 s under coverage)
def test_the_tree_uses_redis_pys_internals_only_inside_the_fence(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert check.main([]) == 0, capsys.readouterr().out


def test_the_fence_keeps_durqs_state_under_the_names_the_check_knows() -> None:
    assert {redispy.IDLE, redispy.SCRIPTS, redispy.SENTINELS_ASKED, redispy.SPIN} == STATE


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _pin() -> tuple[str, str]:
    """(lowest, upper bound) of the redis requirement in pyproject.toml."""
    found = re.search(
        r'"redis\[hiredis\]>=([\d.]+),<([\d.]+)"', (ROOT / "pyproject.toml").read_text()
    )
    assert found, "pyproject.toml pins redis[hiredis]>=OLDEST,<NEXT_MAJOR"
    return found[1], found[2]


def _tested() -> list[str]:
    found = re.search(r"^REDISPY_VERSIONS\s*=\s*(.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert found, "the Makefile names REDISPY_VERSIONS, the redis-py releases CI tests"
    return found[1].split()


def test_the_pin_the_test_matrix_and_the_fences_docstring_name_the_same_versions() -> None:
    lowest, bound = _pin()
    oldest, newest = _tested()
    assert lowest == oldest  # the pin starts at the oldest release tested
    assert _version(bound) == (_version(newest)[0] + 1,)  # and stops before the next major
    doc = " ".join((redispy.__doc__ or "").split())
    assert f"redis-py {oldest}, the oldest supported, and {newest}, the newest" in doc
    assert f"redis[hiredis]>={lowest},<{bound}" in doc


def test_the_redis_py_running_these_tests_is_one_the_pin_allows() -> None:
    lowest, bound = _pin()
    running = _version(re.match(r"[\d.]+", redis.__version__)[0].rstrip("."))  # type: ignore[index]
    assert _version(lowest) <= running < _version(bound)
