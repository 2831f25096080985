"""The dashboard's guards: who may connect, what a page may load, which POSTs count.

* ``Guard``, an ASGI middleware in front of every route: refuses Host headers outside
  ``allowed_hosts`` (a loopback dashboard without a token is otherwise reachable from
  any web page through DNS rebinding), requires the token when one is set (bearer, or
  basic auth with the token as password), and adds headers that keep pages from being
  framed, sniffed, cached or running any script but the dashboard's own file.
* CSRF tokens for actions: a random nonce signed with the app's secret, sent both as an
  HttpOnly SameSite=Strict cookie and as a form field; a POST counts only when the two
  match and the signature holds, and its Origin (when sent) is the dashboard's own.
  The secret (``csrf_secret``) is the one given, else derived from the token, else
  random: the processes of one dashboard behind a load balancer or ``gunicorn -w N``
  must share it, or each refuses the forms the others rendered.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Iterable

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from durq.errors import InvalidArgument

__all__ = [
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "MIN_SECRET",
    "Guard",
    "csrf_ok",
    "csrf_secret",
    "new_csrf_token",
    "origin_ok",
]

CSRF_COOKIE = "durq_csrf"
CSRF_FIELD = "csrf"

_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-security-policy", _CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    # same-origin: POSTs still carry an Origin header for the CSRF check
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]


def _host_only(host: str) -> str:
    """``example.com:8080`` -> ``example.com``; ``[::1]:80`` -> ``[::1]``."""
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def token_matches(authorization: str | None, token: str) -> bool:
    """True when an Authorization header carries ``token``: ``Bearer <token>``, or
    ``Basic`` credentials whose password is the token (the user name is not checked)."""
    if not authorization:
        return False
    scheme, _, value = authorization.partition(" ")
    scheme = scheme.lower()
    expected = token.encode()
    if scheme == "bearer":
        return hmac.compare_digest(value.strip().encode(), expected)
    if scheme == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        _user, sep, password = decoded.partition(b":")
        return bool(sep) and hmac.compare_digest(password, expected)
    return False


class Guard:
    """Host check, token check and security headers for every request of ``app``."""

    def __init__(
        self, app: ASGIApp, *, token: str | None, allowed_hosts: Iterable[str] | None
    ) -> None:
        self.app = app
        self.token = token
        self.allowed = None if allowed_hosts is None else {h.lower() for h in allowed_hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):  # lifespan events pass through
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal: tuple[int, str] | None = None
        if self.allowed is not None:
            host = _host_only(headers.get("host", "").lower())
            if host not in self.allowed:
                refusal = (400, "invalid Host header")
        token = self.token
        if refusal is None and token and not token_matches(headers.get("authorization"), token):
            refusal = (401, "authentication required")
        if refusal is not None:
            if scope["type"] == "websocket":  # none today; refused all the same
                await send({"type": "websocket.close", "code": 1008})
                return
            status, text = refusal
            extra = [(b"www-authenticate", b'Basic realm="durq", charset="UTF-8"')]
            await _plain(send, status, text, extra if status == 401 else None)
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", [])) + _HEADERS
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def _plain(
    send: Send, status: int, text: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = text.encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        *_HEADERS,
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


MIN_SECRET = 16
"""Characters (or bytes) a dashboard secret has at least."""


def csrf_secret(secret: str | bytes | None, token: str | None) -> bytes:
    """The key that signs CSRF tokens: from ``secret`` when given (the same in every
    process of one dashboard), else from the access ``token`` (shared by those
    processes too), else random (one process: its restart just asks for a new page).
    Derived with a label of its own, so the key is never the secret or token itself."""
    if secret is not None:
        raw = secret.encode() if isinstance(secret, str) else bytes(secret)
        if len(raw) < MIN_SECRET:
            raise InvalidArgument(f"the dashboard secret must be at least {MIN_SECRET} characters")
        return hmac.new(b"durq dashboard csrf: secret", raw, hashlib.sha256).digest()
    if token:
        return hmac.new(b"durq dashboard csrf: token", token.encode(), hashlib.sha256).digest()
    return secrets.token_bytes(32)


def _sign(secret: bytes, nonce: str) -> str:
    mac = hmac.new(secret, nonce.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")


def new_csrf_token(secret: bytes) -> str:
    """A fresh CSRF token: ``<nonce>.<signature>``."""
    nonce = secrets.token_urlsafe(24)
    return f"{nonce}.{_sign(secret, nonce)}"


def csrf_ok(secret: bytes, cookie: str | None, field: str | None) -> bool:
    """True when the form's token equals the cookie's and carries a valid signature
    (so a cookie planted from a sibling domain does not pass)."""
    if not cookie or not field or not hmac.compare_digest(cookie.encode(), field.encode()):
        return False
    nonce, sep, signature = cookie.partition(".")
    return bool(sep) and hmac.compare_digest(signature.encode(), _sign(secret, nonce).encode())


def origin_ok(headers: Headers) -> bool:
    """False when the request says it comes from another site: an Origin (or, without
    one, a Referer) whose host is not the Host the request was sent to."""
    source = headers.get("origin") or headers.get("referer")
    if source is None:
        return True  # not sent by every client; the CSRF token still decides
    if source == "null":
        return False
    _scheme, sep, rest = source.partition("://")
    if not sep:
        return False
    netloc = rest.split("/", 1)[0].lower()
    return netloc == headers.get("host", "").lower()
