"""Helpers shared by the CLI commands."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

from durq.app import App

__all__ = ["load_app", "namespace_option", "url_option"]

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
    app: Any = getattr(module, attr, None)
    if not isinstance(app, App):
        raise click.BadParameter(f"{target!r} is not a durq.App (found {type(app).__name__})")
    return app
