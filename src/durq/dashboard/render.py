"""Rendering pages: the Jinja2 environment (autoescaping every value, so job data,
reasons and group names always show as text), its filters, and the URL builder. A page
is rendered with a dashboard's state (``durq.dashboard.state.render``)."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
import orjson

from durq.dashboard.charts import format_count, format_rate, format_seconds

__all__ = ["environment", "url_builder"]

TEMPLATES = Path(__file__).parent / "templates"


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def _ago(ts: float | None, now: float | None = None) -> str:
    if ts is None:
        return "-"
    delta = (now if now is not None else time.time()) - ts
    if delta < 0:
        return "in " + format_seconds(-delta)
    return format_seconds(delta) + " ago"


def _thousands(value: int | float) -> str:
    return f"{value:,}"


def _pretty_json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2, default=repr).decode()


def environment() -> jinja2.Environment:
    """The templates, with autoescaping on for everything (not only ``.html`` names)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        when=_when,
        ago=_ago,
        thousands=_thousands,
        count=format_count,
        rate=format_rate,
        seconds=format_seconds,
        pretty_json=_pretty_json,
    )
    # the same formatters as functions, for macros that take one as an argument
    env.globals.update(rate=format_rate, seconds=format_seconds, count=format_count)
    return env


def url_builder(root: str) -> Callable[..., str]:
    """``url(path, **query)`` under the app's mount point ``root``; None values are
    left out, the rest URL-encoded."""

    def url(path: str, **params: Any) -> str:
        query = {k: v for k, v in params.items() if v is not None}
        return root + path + ("?" + urlencode(query) if query else "")

    return url
