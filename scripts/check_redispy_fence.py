#!/usr/bin/env python3
"""Fail when code outside the fence uses redis-py's internals (``make check`` runs it).

The fence is ``src/durq/transport/redispy.py`` (and its own tests): every use durq makes of
what redis-py does not offer as its API lives there, so a redis-py release that changes
them breaks one module. Everywhere else (src, tests, bench, examples, scripts) this
check reports, with file and line:

- an import of a private redis-py module or name (``redis._parsers``, ``from redis.x
  import _y``);
- an attribute whose name is private in redis-py (a ``_name`` that redis-py defines or
  assigns anywhere, read from the installed package), read or written on anything but
  ``self``/``cls``, or on ``self`` inside a class derived from one of redis-py's;
  also ``getattr``/``setattr``/``hasattr``/``delattr`` with such a name. A private name
  that durq defines too (``_read``, ``_executor``...) counts only where redis-py's own
  objects are the usual owners (``ALWAYS``);
- durq's state on redis-py's objects outside ``redispy.attached``: a name the fence keeps
  there (its ``durq_...`` constants: ``IDLE``, ``SCRIPTS``...) as an attribute or a
  reflected name, or any ``durq_`` key of an object's ``__dict__`` or ``vars()``.

    python scripts/check_redispy_fence.py            # the tree
    python scripts/check_redispy_fence.py FILE...    # these files (each as if outside)
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FENCE_MODULE = "src/durq/transport/redispy.py"
#: the fence, and its tests that look inside redis-py's connections
FENCE = frozenset({FENCE_MODULE, "tests/transport/test_redispy.py", "tests/transport/test_spin.py"})
SCANNED = ("src", "tests", "bench", "examples", "scripts")
#: redis-py's private names that are flagged even though durq defines them too: the
#: internals of its connections, parsers and pools that code outside the fence could reach
ALWAYS = frozenset(
    {
        "_sock", "_parser", "_reader", "_writer", "_buffer", "_read_size", "_host_error",
        "_initialize", "_lock", "_connections", "_available_connections",
        "_in_use_connections", "_created_connections", "_connect", "_socket_read_size",
    }
)  # fmt: skip
_DURQ_STATE = re.compile(r"^_?durq_\w+$")
_REFLECT = frozenset({"getattr", "setattr", "hasattr", "delattr"})


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _defined(files: Iterable[Path]) -> set[str]:
    """The private names these files define: functions, classes, assigned names and
    attributes."""
    names: set[str] = set()
    for path in files:
        try:
            tree = ast.parse(path.read_text(), str(path))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = node.name
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                name = node.attr
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                name = node.id
            else:
                continue
            if _private(name):
                names.add(name)
    return names


def redis_private_names() -> set[str]:
    """The private names the installed redis-py defines."""
    spec = importlib.util.find_spec("redis")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("check_redispy_fence: redis-py is not installed")
    return _defined(Path(spec.submodule_search_locations[0]).rglob("*.py"))


def state_names(fence: Path = ROOT / FENCE_MODULE) -> frozenset[str]:
    """The names under which the fence keeps durq's state on redis-py's objects: its
    module-level string constants that start with ``durq_``."""
    names = set()
    for node in ast.parse(fence.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            value = node.value.value
            if isinstance(value, str) and _DURQ_STATE.match(value):
                names.add(value)
    return frozenset(names)


def _is_redis_module(name: str) -> bool:
    return name == "redis" or name.startswith("redis.")


class _Checker(ast.NodeVisitor):
    def __init__(self, flagged: frozenset[str], state: frozenset[str]) -> None:
        self.flagged = flagged
        self.state = state
        self.problems: list[tuple[int, str]] = []
        self.redis_names: set[str] = set()  # names bound to redis-py's modules or classes
        self.classes: list[bool] = []  # per enclosing class: derived from redis-py's?

    def _report(self, node: ast.AST, message: str) -> None:
        self.problems.append((getattr(node, "lineno", 0), message))

    def _from_redis(self, node: ast.expr) -> bool:
        while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
            node = node.func if isinstance(node, ast.Call) else node.value
        return isinstance(node, ast.Name) and node.id in self.redis_names

    # imports: private modules and names, and what they bind
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if _is_redis_module(alias.name):
                if any(_private(part) for part in alias.name.split(".")):
                    self._report(node, f"imports redis-py's private module {alias.name}")
                self.redis_names.add(alias.asname or alias.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level == 0 and _is_redis_module(module):
            if any(_private(part) for part in module.split(".")):
                self._report(node, f"imports from redis-py's private module {module}")
            for alias in node.names:
                if _private(alias.name):
                    self._report(node, f"imports redis-py's private {module}.{alias.name}")
                self.redis_names.add(alias.asname or alias.name)

    def visit_Assign(self, node: ast.Assign) -> None:
        if self._from_redis(node.value):  # base: Any = sentinels.SentinelConnectionPool
            self.redis_names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        value, target = node.value, node.target
        if value is not None and self._from_redis(value) and isinstance(target, ast.Name):
            self.redis_names.add(target.id)
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.classes.append(any(self._from_redis(base) for base in node.bases))
        self.generic_visit(node)
        self.classes.pop()

    # uses: attributes, reflection, durq's state on foreign objects
    def visit_Attribute(self, node: ast.Attribute) -> None:
        owner = node.value.id if isinstance(node.value, ast.Name) else None
        mine = owner in ("self", "cls") and not (self.classes and self.classes[-1])
        if node.attr in self.flagged and not mine:
            self._report(node, f"names redis-py's private attribute {node.attr}")
        elif node.attr in self.state:
            self._report(node, f"keeps durq's state {node.attr} on an object: use redispy.attached")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in _REFLECT and len(node.args) >= 2:
            name = node.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                if name.value in self.flagged:
                    self._report(node, f"{func.id}() of redis-py's private attribute {name.value}")
                elif name.value in self.state:
                    self._report(
                        node, f"{func.id}() of durq's state {name.value}: use redispy.attached"
                    )
        if isinstance(func, ast.Attribute) and func.attr in ("get", "setdefault", "pop"):
            self._check_state_key(func.value, node.args[:1])
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self._check_state_key(node.value, [node.slice])
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            for right in node.comparators:
                self._check_state_key(right, [node.left])
        self.generic_visit(node)

    def _check_state_key(self, container: ast.expr, keys: list[ast.expr]) -> None:
        """``x.__dict__[key]``, ``vars(x).get(key)``, ``key in x.__dict__`` with a durq_
        key: durq's state on a foreign object, outside the fence."""
        instance_dict = (isinstance(container, ast.Attribute) and container.attr == "__dict__") or (
            isinstance(container, ast.Call)
            and isinstance(container.func, ast.Name)
            and container.func.id == "vars"
        )
        if not instance_dict:
            return
        for key in keys:
            name = key.value if isinstance(key, ast.Constant) else None
            if isinstance(name, str) and _DURQ_STATE.match(name):
                self._report(key, f"keeps durq's state {name} on an object: use redispy.attached")


def check_source(
    text: str, flagged: frozenset[str], state: frozenset[str], filename: str = "<source>"
) -> list[str]:
    """The problems of one file's source, as ``line: message``."""
    checker = _Checker(flagged, state)
    checker.visit(ast.parse(text, filename))
    return [f"{line}: {message}" for line, message in sorted(checker.problems)]


def _tree_files() -> Iterator[Path]:
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if any(part.startswith(".") for part in relative.parts):
                continue  # venvs, caches (bench/.envs)
            if relative.as_posix() not in FENCE:
                yield path


def flagged_names() -> frozenset[str]:
    """redis-py's private names that code outside the fence may not name: those durq
    does not define itself, and ALWAYS."""
    redis_names = redis_private_names()
    durq_names = _defined(p for folder in SCANNED for p in (ROOT / folder).rglob("*.py"))
    return frozenset((redis_names - durq_names) | (redis_names & ALWAYS))


def main(argv: list[str]) -> int:
    flagged, state = flagged_names(), state_names()
    files = [Path(a).resolve() for a in argv] if argv else list(_tree_files())
    failures = 0
    for path in files:
        for problem in check_source(path.read_text(), flagged, state, str(path)):
            print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{problem}")
            failures += 1
    if failures:
        print(
            f"check_redispy_fence: {failures} use(s) of redis-py's internals outside "
            "src/durq/transport/redispy.py: move them into the fence (its docstring says "
            "what each is for)"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
