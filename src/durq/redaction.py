"""What is shown of secrets: Redis URLs without their credentials (``redact_url``), and
task data without the values a ``Redact`` names.

``redact_url`` is the one function every message, log line, page and repr that shows a
URL goes through (``durq.transport.connection.redact`` is the same function). ``Redact`` is the
hook for task data: argument and field names, and patterns, whose values the
dashboard, the CLI, the worker's logs and the stored errors replace by ``***``. What is
stored for the task itself (its payload) is never changed: the task needs its
arguments.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import unquote_plus

from durq.errors import InvalidArgument
from durq.models import JobInfo

__all__ = ["DEFAULT_KEYS", "MASK", "Redact", "redact_url"]

MASK = "***"
"""What a hidden value is shown as."""

# -- URLs ---------------------------------------------------------------------------

# query options that carry a secret: redis-py takes every query option of a URL as a
# connection argument (password, ssl_password: a client key's passphrase), durq's
# Sentinel URLs add sentinel_password; any name holding one of these words counts, so
# that the options of later redis-py versions are hidden too
_SECRET_OPTION = re.compile(r"pass|pwd|secret|token|credential|auth", re.IGNORECASE)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")


def _hide_options(text: str) -> str:
    """``a=1&password=x`` -> ``a=1&password=***``: each ``name=value`` pair of a query
    (or fragment) whose decoded name is a secret's; the others as written."""
    pairs = []
    for pair in text.split("&"):
        name, eq, _value = pair.partition("=")
        if eq and _SECRET_OPTION.search(unquote_plus(name)):
            pair = f"{name}={MASK}"
        pairs.append(pair)
    return "&".join(pairs)


def redact_url(url: str) -> str:
    """``url`` as it may be shown: the passwords of its user information
    (``user:password@``, ``:password@``, on every kind of URL: one server, Cluster,
    Sentinel) and the values of its secret query options (``password``,
    ``ssl_password``, ``sentinel_password``...) replaced by ``***``.

    Never raises. A URL that cannot be told apart safely (an ``@`` after its host part,
    as an unencoded ``/``, ``?`` or ``#`` in a password leaves it; no scheme) loses
    everything before its last ``@``."""
    text = str(url)
    scheme, sep, rest = text.partition("://")
    if not sep or not _SCHEME.fullmatch(scheme):
        scheme, rest = "", text
    # the host part ends where redis-py's parser ends it: at the first / ? or #
    end = next((i for i, ch in enumerate(rest) if ch in "/?#"), len(rest))
    netloc, tail = rest[:end], rest[end:]
    if "@" in tail or not scheme:
        _userinfo, at, after = rest.rpartition("@")
        if at:
            rest = f"{MASK}@{after}"
        shown = _hide_query(rest)
    else:
        userinfo, at, hosts = netloc.rpartition("@")
        if at and ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":" + MASK
        shown = (f"{userinfo}@{hosts}" if at else hosts) + _hide_query(tail)
    return f"{scheme}://{shown}" if scheme else shown


def _hide_query(text: str) -> str:
    """The secret options hidden in the query and the fragment of a URL's tail."""
    before_fragment, hash_, fragment = text.partition("#")
    path, question, query = before_fragment.partition("?")
    if question:
        path = f"{path}?{_hide_options(query)}"
    return f"{path}#{_hide_options(fragment)}" if hash_ else path


# -- task data ----------------------------------------------------------------------

DEFAULT_KEYS = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "accesskey",
    "privatekey",
    "authorization",
    "credential",
    "cookie",
)
"""The names ``Redact()`` hides by default."""

# depth past which nested data is hidden whole rather than walked (data from Redis may
# nest thousands deep; Python's recursion would give out first)
_MAX_DEPTH = 100
# "user:password@" of URLs inside text (a connection error's message, a traceback)
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/@:]*):[^\s/@]*@")
# a name = or : a value, in text: the name (maybe quoted: group 1 is its quote), the
# separator, and a quoted value or a bare word; the name decides (Redact.hides)
_PAIR = re.compile(
    r"""(?x)
    (?<![\w.-])(["']?)([A-Za-z_][\w.-]*)\1   # the name, maybe quoted
    (\s*[:=]\s*)(?!//)                        # = or : (not a URL's scheme)
    ("[^"\n]*"|'[^'\n]*'|[^\s,;&"'(){}\[\]<>]+)  # the value
    """
)
_SQUEEZE = str.maketrans("", "", " \t\n\r\f\v_.-")


def _normal(name: str) -> str:
    """A name compared without case and separators: ``API-Key`` -> ``apikey``."""
    return name.translate(_SQUEEZE).lower()


@dataclass(frozen=True)
class Redact:
    """Which parts of task data are secret, for what durq shows: the dashboard, the
    CLI, the worker's logs, and the errors it stores (a dead letter's message and
    traceback, a retry's reason), which are redacted before they are written.

        app = durq.App(redact=durq.Redact(keys=("iban",), patterns=(r"sk_live_\\w+",)))

    Args:
        keys: argument and field names whose values are hidden: a keyword argument,
            a key of a dict at any depth, and ``name=value`` or ``"name": value`` in
            text (an exception's message, a traceback). A name matches when it contains
            a key, ignoring case and ``_ - .``: ``password`` hides ``db_password`` and
            ``PASSWORD``, ``apikey`` hides ``api_key`` and ``apiKey``. These are added
            to ``DEFAULT_KEYS`` (password, secret, token, api key...) unless
            ``defaults=False``.
        patterns: regular expressions; every match in any text (string values,
            messages, tracebacks) is replaced by ``***``.
        defaults: include ``DEFAULT_KEYS``.

    Positional arguments have no name in a stored job: they are hidden by patterns, or
    by passing them as keyword arguments. ``user:password@`` in URLs inside text is
    always hidden.
    """

    keys: Sequence[str] = ()
    patterns: Sequence[str | re.Pattern[str]] = ()
    defaults: bool = True
    _names: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _patterns: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.keys, str) or isinstance(self.patterns, (str, re.Pattern)):
            raise InvalidArgument("Redact: keys and patterns are sequences (a tuple, a list)")
        names: list[str] = list(DEFAULT_KEYS) if self.defaults else []
        for key in self.keys:
            if not isinstance(key, str) or not _normal(key):
                raise InvalidArgument(f"Redact: a key is a non-empty name, got {key!r}")
            names.append(_normal(key))
        compiled = []
        for pattern in self.patterns:
            try:
                regex = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)
            except (re.error, TypeError) as exc:
                raise InvalidArgument(f"Redact: bad pattern {pattern!r}: {exc}") from None
            if regex.search(""):
                raise InvalidArgument(f"Redact: pattern {regex.pattern!r} matches nothing at all")
            compiled.append(regex)
        unique = tuple(dict.fromkeys(names))
        object.__setattr__(self, "keys", tuple(self.keys))
        object.__setattr__(self, "patterns", tuple(self.patterns))
        object.__setattr__(self, "_names", unique)
        object.__setattr__(self, "_patterns", tuple(compiled))

    def hides(self, name: object) -> bool:
        """True when values under ``name`` (an argument, a dict key) are hidden."""
        if not isinstance(name, str):
            return False
        normal = _normal(name)
        return any(key in normal for key in self._names)

    def text(self, text: str) -> str:
        """``text`` with credentials in URLs, ``name=value`` pairs of the keys, and the
        patterns' matches replaced by ``***``."""
        if not text:
            return text
        if "://" in text:
            text = _URL_CREDENTIALS.sub(rf"\1:{MASK}@", text)
        # the pairs' regex is the costly part: only where a key appears at all
        squeezed = text.lower().replace("_", "").replace("-", "").replace(".", "")
        if any(key in squeezed for key in self._names):
            text = _PAIR.sub(self._hide_pair, text)
        for regex in self._patterns:
            text = regex.sub(MASK, text)
        return text

    def _hide_pair(self, match: re.Match[str]) -> str:
        if not self.hides(match.group(2)):
            return match.group()
        name_quote, name, separator, value = match.groups()
        quote = value[0] if value[0] in "\"'" else ""
        return f"{name_quote}{name}{name_quote}{separator}{quote}{MASK}{quote}"

    def value(self, value: Any) -> Any:
        """A copy of JSON-like ``value`` with the values under hidden keys replaced by
        ``***``, and every string through ``text``."""
        return self._value(value, 0)

    def _value(self, value: Any, depth: int) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, bytes | bytearray):
            return self.text(bytes(value).decode("utf-8", "replace"))
        if depth >= _MAX_DEPTH and isinstance(value, Mapping | list | tuple):
            return MASK
        if isinstance(value, Mapping):
            return {
                k: MASK if self.hides(k) else self._value(v, depth + 1) for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self._value(v, depth + 1) for v in value]
        return value

    def call(
        self, args: Iterable[Any], kwargs: Mapping[str, Any], names: Sequence[str] = ()
    ) -> tuple[list[Any], dict[str, Any]]:
        """A task call's arguments as they may be shown; ``names``: the parameter
        names of the positional arguments, when known."""
        shown = []
        for i, arg in enumerate(args):
            hidden = i < len(names) and self.hides(names[i])
            shown.append(MASK if hidden else self.value(arg))
        return shown, self.value(kwargs)

    def fields(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """A failure reason (``message``, ``traceback``...) as it may be stored and
        shown."""
        shown: dict[str, Any] = self._value(fields, 0)
        return shown

    def job(self, info: JobInfo) -> JobInfo:
        """``info`` as the dashboard and the CLI show it: its failure reason, its last
        failures and its progress information through this Redact (its payload stays as
        stored: show ``value(info.payload())``)."""
        progress = info.progress
        if progress is not None and progress.info is not None:
            progress = replace(progress, info=self.value(progress.info))
        reason = self.fields(info.reason) if info.reason else info.reason
        errors = tuple(self.fields(error) for error in info.errors)
        return replace(info, reason=reason, errors=errors, progress=progress)
