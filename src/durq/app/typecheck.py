"""A task call's argument values checked against the function's type hints, at enqueue.

``add(a: int, b: int)`` enqueued as ``add.enqueue("1", "2")`` fails in the caller's code
with ``add(): argument 'a' is '1' (a str), expected int``, not in a worker. What is
checked are the types a JSON argument can be: ``int``, ``float`` (an int is accepted),
``str``, ``bool``, ``None``, lists, tuples and dicts of them (``list[int]``,
``tuple[str, int]``, ``dict[str, float]``, ``Sequence``/``Mapping``), unions and
``Optional``, ``Literal``, ``TypedDict``, and, as their JSON form (a dict of their
fields), dataclasses and pydantic models (validated by pydantic when it is installed).
Any other hint (``Any``, a class of your own, a ``TypeVar``) accepts every value: the
check never refuses a call it does not understand.

The hints are read once, at a task's first enqueue (so forward references declared later
in the module resolve), and compiled into one checker per parameter; which parameter
each argument goes to is remembered per argument shape (how many positional arguments,
which keywords), as ``durq.app.arguments`` does for arity. A task opts out with
``@app.task(check_types=False)``.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import inspect
import sys
import types
import typing
from collections.abc import Callable
from typing import Any

__all__ = ["TypeCheck"]

#: a compiled hint: None when ``value`` fits it, else what was expected
Checker = Callable[[Any], "str | None"]
#: argument shapes whose plan is remembered per task
_SHAPES = 256


class TypeCheck:
    """The type check of one task's calls.

    Args:
        name: the task's name, which starts each problem's wording.
        fn: the task function (its hints are read at the first check).
        signature: its signature.
    """

    def __init__(self, name: str, fn: Callable[..., Any], signature: inspect.Signature) -> None:
        self.name = name
        self.fn = fn
        self.signature = signature
        #: by argument shape: (position or keyword, parameter name, checker) of each
        #: argument whose parameter has a hint worth checking
        self._plans: dict[Any, tuple[tuple[int | str, str, Checker], ...]] = {}
        self._params: dict[str, Checker | None] | None = None

    def problem(self, args: Any, kwargs: Any) -> str | None:
        """Why an argument's value does not fit its parameter's hint, or None (call it
        once the call fits the signature)."""
        shape = (len(args), *kwargs) if kwargs else len(args)
        plan = self._plans.get(shape)
        if plan is None:
            plan = self._plan(len(args), kwargs)
            if len(self._plans) < _SHAPES:
                self._plans[shape] = plan
        for where, pname, check in plan:
            value = args[where] if type(where) is int else kwargs[where]
            expected = check(value)
            if expected is not None:
                return f"{self.name}(): argument {pname!r} is {_shown(value)}, expected {expected}"
        return None

    def _plan(self, given: int, kwargs: Any) -> tuple[tuple[int | str, str, Checker], ...]:
        """Which checker each argument of this shape meets."""
        if self._params is None:
            self._params = self._compile()
        params = self._params
        plan: list[tuple[int | str, str, Checker]] = []
        every = list(self.signature.parameters.values())
        positional = [p for p in every if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        star = next((p for p in every if p.kind is p.VAR_POSITIONAL), None)
        stars = next((p for p in every if p.kind is p.VAR_KEYWORD), None)
        for index in range(given):
            param = positional[index] if index < len(positional) else star
            if param is not None and (check := params.get(param.name)) is not None:
                extra = index - len(positional)  # an item of *args: name[i]
                label = param.name if extra < 0 else f"{param.name}[{extra}]"
                plan.append((index, label, check))
        for key in kwargs:
            param = self.signature.parameters.get(key)
            if param is None or param.kind in (param.POSITIONAL_ONLY, param.VAR_POSITIONAL):
                param = stars
            if param is not None and (check := params.get(param.name)) is not None:
                plan.append((key, key, check))
        return tuple(plan)

    def _compile(self) -> dict[str, Checker | None]:
        """A checker per parameter (None: its hint accepts anything). A hint that does
        not resolve (a name imported only for type checkers) checks nothing; the
        others still do."""
        try:
            hints = typing.get_type_hints(self.fn)
        except Exception:
            hints = _each_hint(self.fn)
        return {name: _compile(hints[name]) for name in self.signature.parameters if name in hints}


def _each_hint(fn: Callable[..., Any]) -> dict[str, Any]:
    """The hints of ``fn`` that resolve, one by one (``get_type_hints`` gives up at the
    first that does not)."""
    found: dict[str, Any] = {}
    namespace = getattr(fn, "__globals__", {})
    for name, hint in getattr(fn, "__annotations__", {}).items():
        try:  # what get_type_hints does: the hint is the task author's own code
            found[name] = eval(hint, namespace) if isinstance(hint, str) else hint
        except Exception:
            continue
    return found


def _shown(value: Any) -> str:
    """A value as an error quotes it: short, with its type."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} (a {type(value).__name__})"


def _of(kinds: type | tuple[type, ...], label: str) -> Checker:
    def check(value: Any) -> str | None:
        return None if isinstance(value, kinds) else label

    return check


def _none(value: Any) -> str | None:
    return None if value is None else "None"


#: the checkers of the scalar hints
_SCALARS: dict[Any, Checker] = {
    None: _none,
    type(None): _none,
    bool: _of(bool, "bool"),
    int: _of(int, "int"),
    float: _of((int, float), "float"),  # an int is a float, as for type checkers
    str: _of(str, "str"),
}
_SEQUENCES = (list, tuple, collections.abc.Sequence, collections.abc.MutableSequence)
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)


def _compile(hint: Any, depth: int = 0) -> Checker | None:
    """The checker of ``hint``, or None when it accepts any value."""
    if depth > 20 or hint is Any or hint is object or isinstance(hint, typing.TypeVar):
        return None
    try:
        return _SCALARS[hint]
    except (KeyError, TypeError):  # TypeError: an unhashable hint
        pass
    supertype = getattr(hint, "__supertype__", None)
    if supertype is not None:  # NewType
        return _compile(supertype, depth + 1)
    origin = typing.get_origin(hint)
    if origin is None:
        return _class(hint, depth)
    params = typing.get_args(hint)
    if origin is typing.Annotated:
        return _compile(params[0], depth + 1)
    if origin is typing.Union or origin is types.UnionType:
        return _union(params, depth)
    if origin is typing.Literal:
        return _literal(params)
    if origin in _SEQUENCES:
        return _sequence(hint, origin, params, depth)
    if origin in _MAPPINGS:
        return _mapping(params, depth)
    return None


def _class(hint: Any, depth: int) -> Checker | None:
    """The checker of a bare class: a container, a record type, or None."""
    if hint in (list, tuple):
        return _sequence(hint, hint, (), depth)
    if hint is dict:
        return _mapping((), depth)
    if not isinstance(hint, type):
        return None
    if typing.is_typeddict(hint):
        return _typeddict(hint, depth)
    if dataclasses.is_dataclass(hint):
        return _dataclass(hint, depth)
    if _is_pydantic_model(hint):
        return _pydantic(hint)
    return None


def _name(hint: Any) -> str:
    """A hint as an error names it."""
    if isinstance(hint, type) and typing.get_origin(hint) is None:
        return "None" if hint is type(None) else hint.__name__
    return repr(hint).replace("typing.", "")


def _union(params: tuple[Any, ...], depth: int) -> Checker | None:
    checks = [_compile(p, depth + 1) for p in params]
    if any(c is None for c in checks):
        return None
    label = " | ".join(_name(p) for p in params)
    fits: list[Checker] = [c for c in checks if c is not None]

    def check(value: Any) -> str | None:
        for fit in fits:
            if fit(value) is None:
                return None
        return label

    return check


def _literal(values: tuple[Any, ...]) -> Checker:
    label = " | ".join(repr(v) for v in values)
    allowed = [(type(v), v) for v in values]

    def check(value: Any) -> str | None:
        return None if (type(value), value) in allowed else label

    return check


def _sequence(hint: Any, origin: Any, params: tuple[Any, ...], depth: int) -> Checker:
    """A list or tuple (JSON makes both a list): each item checked; a fixed tuple's
    length and items by position."""
    label = _name(hint) if params else ("tuple" if origin is tuple else "list")
    if origin is tuple and params and not (len(params) == 2 and params[1] is Ellipsis):
        fixed = [_compile(p, depth + 1) for p in params]

        def check_fixed(value: Any) -> str | None:
            if not isinstance(value, (list, tuple)) or len(value) != len(fixed):
                return label
            for item, fit in zip(value, fixed, strict=True):
                if fit is not None and fit(item) is not None:
                    return label
            return None

        return check_fixed
    item = _compile(params[0], depth + 1) if params else None

    def check(value: Any) -> str | None:
        if not isinstance(value, (list, tuple)):
            return label
        if item is not None:
            for element in value:
                if item(element) is not None:
                    return label
        return None

    return check


def _mapping(params: tuple[Any, ...], depth: int) -> Checker:
    key = _compile(params[0], depth + 1) if params else None
    item = _compile(params[1], depth + 1) if len(params) > 1 else None
    label = f"dict[{_name(params[0])}, {_name(params[1])}]" if len(params) > 1 else "dict"

    def check(value: Any) -> str | None:
        if not isinstance(value, dict):
            return label
        for k, v in value.items():
            if (key is not None and key(k) is not None) or (
                item is not None and item(v) is not None
            ):
                return label
        return None

    return check


def _fields(label: str, fields: dict[str, Checker | None], required: frozenset[str]) -> Checker:
    """A dict whose keys are ``fields`` (those in ``required`` present), each value
    fitting its field's hint."""

    def check(value: Any) -> str | None:
        if not isinstance(value, dict):
            return label
        if not required.issubset(value):
            missing = ", ".join(sorted(required.difference(value)))
            return f"{label} (missing {missing})"
        for k, v in value.items():
            if k not in fields:
                return f"{label} (no field {k!r})"
            fit = fields[k]
            if fit is not None and (expected := fit(v)) is not None:
                return f"{label} (field {k!r}: {expected})"
        return None

    return check


def _typeddict(hint: type, depth: int) -> Checker:
    hints = typing.get_type_hints(hint)
    fields = {k: _compile(h, depth + 1) for k, h in hints.items()}
    required = frozenset(getattr(hint, "__required_keys__", hints))
    return _fields(hint.__name__, fields, required)


def _dataclass(hint: type, depth: int) -> Checker:
    """A dataclass as its JSON form: a dict of its fields (the task builds the object)."""
    hints = typing.get_type_hints(hint)
    found = dataclasses.fields(hint)
    fields = {f.name: _compile(hints.get(f.name, Any), depth + 1) for f in found if f.init}
    required = frozenset(
        f.name
        for f in found
        if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )
    return _fields(f"{hint.__name__} (a dict of its fields)", fields, required)


def _is_pydantic_model(hint: type) -> bool:
    """Whether ``hint`` is a pydantic model (pydantic is never imported for this)."""
    pydantic = sys.modules.get("pydantic")
    base = getattr(pydantic, "BaseModel", None)
    return base is not None and issubclass(hint, base)


def _pydantic(hint: Any) -> Checker:
    """A pydantic model as its JSON form, validated by the model itself."""
    label = f"{hint.__name__} (a dict of its fields)"

    def check(value: Any) -> str | None:
        if not isinstance(value, dict):
            return label
        try:
            hint.model_validate(value)
        except ValueError as exc:  # pydantic's ValidationError
            first = exc.errors()[0] if hasattr(exc, "errors") else {}
            where = ".".join(str(p) for p in first.get("loc", ()))
            return f"{label} ({where}: {first.get('msg', exc)})"
        return None

    return check
