"""Rendering pages: the Jinja2 environment (autoescaping every value, so job data,
reasons and group names always show as text) and the response helper that issues the
CSRF cookie."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import jinja2
import orjson
from starlette.requests import Request
from starlette.responses import HTMLResponse

from durq.dashboard.charts import format_count, format_rate, format_seconds
from durq.dashboard.security import CSRF_COOKIE, csrf_ok, new_csrf_token

if TYPE_CHECKING:
    from durq.dashboard.state import Dashboard

__all__ = ["environment", "render", "url_builder"]

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


def render(
    request: Request, dash: Dashboard, name: str, context: dict[str, Any], status: int = 200
) -> HTMLResponse:
    """Render template ``name``; sets a CSRF cookie when the browser has no valid one."""
    root = str(request.scope.get("root_path", "")).rstrip("/")
    token = request.cookies.get(CSRF_COOKIE)
    fresh = not csrf_ok(dash.secret, token, token)
    if fresh:
        token = new_csrf_token(dash.secret)
    page = dash.templates.get_template(name).render(
        root=root,
        url=url_builder(root),
        config=dash.config,
        redis=dash.display_url,
        csrf_token=token,
        can_act=not dash.config.read_only,
        now=time.time(),
        path=request.url.path,
        **context,
    )
    response = HTMLResponse(page, status_code=status)
    if fresh and token is not None:
        response.set_cookie(
            CSRF_COOKIE,
            token,
            path=root or "/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
    return response
