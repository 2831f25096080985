"""Helpers shared by the CLI commands."""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import click

from durq.app.app import App
from durq.errors import InvalidArgument
from durq.redaction import Redact

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["load_app", "namespace_option", "redact_options", "terminal", "url_option"]

url_option = click.option(
    "--url",
    envvar="DURQ_URL",
    default=None,
    show_envvar=True,
    help="Redis URL (redis://, rediss://, unix://). Default: redis://localhost:6379/0.",
)
namespace_option = click.option(
    "--namespace", default="durq", show_default=True, help="Key namespace of the queues."
)


def load_app(target: str) -> App:
    """Import ``module:attribute`` (the current directory is importable) and return the
    App it names."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise click.BadParameter(f"{target!r}: expected MODULE:APP, e.g. myapp.tasks:app")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise click.BadParameter(f"cannot import {module_name!r}: {exc}") from None
    if not hasattr(module, attr):
        apps = sorted(name for name, value in vars(module).items() if isinstance(value, App))
        hint = f"; its durq.App: {', '.join(apps)}" if apps else "; it defines no durq.App"
        raise click.BadParameter(f"module {module_name!r} has no attribute {attr!r}{hint}")
    app: Any = getattr(module, attr)
    if not isinstance(app, App):
        raise click.BadParameter(f"{target!r} is not a durq.App (found {type(app).__name__})")
    return app


def redact_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--redact-key`` and ``--redact-pattern`` (repeatable; or ``$DURQ_REDACT_KEYS``
    and ``$DURQ_REDACT_PATTERNS``, separated by spaces) for a command that shows task
    data; it receives them as ``redact``, a ``durq.Redact`` of the default keys and
    these."""

    @functools.wraps(command)
    def run(*args: Any, redact_keys: tuple[str, ...], redact_patterns: tuple[str, ...],
            **kwargs: Any) -> Any:  # fmt: skip
        try:
            redact = Redact(keys=redact_keys, patterns=redact_patterns)
        except InvalidArgument as exc:
            raise click.BadParameter(str(exc)) from None
        return command(*args, redact=redact, **kwargs)

    patterns = click.option(
        "--redact-pattern",
        "redact_patterns",
        multiple=True,
        envvar="DURQ_REDACT_PATTERNS",
        show_envvar=True,
        metavar="REGEX",
        help="Hide what this regular expression matches in task data (repeatable).",
    )
    keys = click.option(
        "--redact-key",
        "redact_keys",
        multiple=True,
        envvar="DURQ_REDACT_KEYS",
        show_envvar=True,
        metavar="NAME",
        help="Hide the values of arguments and fields whose name contains NAME, besides "
        "password, secret, token, api key... (repeatable).",
    )
    return keys(patterns(run))


class _Terminal:
    """rich's Console, made anew at each use: a Console measures the terminal (its size,
    ``COLUMNS``) when it is made, and one made when its module was imported would keep
    the width of the first command that imported it, in a process that runs several
    (tests, an embedding program)."""

    def __getattr__(self, name: str) -> Any:
        from rich.console import Console

        return getattr(Console(), name)


def terminal() -> Console:
    """The console a command prints its tables to (``_Terminal``)."""
    return cast("Console", _Terminal())
