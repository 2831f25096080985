"""The requests an operation yields to its driver, and the Op generator type."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from durq.lua import Script

__all__ = ["Command", "Op", "Pipeline", "Request", "ScriptCall", "WaitCall"]

T = TypeVar("T")
Arg: TypeAlias = str | bytes | int | float


@dataclass(frozen=True, slots=True)
class ScriptCall:
    """Run ``script`` with EVALSHA (loading it on NOSCRIPT); the reply is sent back."""

    script: Script
    keys: Sequence[str]
    args: Sequence[Arg]


@dataclass(frozen=True, slots=True)
class Command:
    """Send one plain Redis command (a single-key read or write, or a blocking read whose
    server-side timeout is in ``args``); the reply is sent back."""

    args: tuple[Arg, ...]


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Send several calls in one round trip; the list of replies is sent back.

    A reply that is an error comes back as the exception object, in its place. A
    Command may block (BZPOPMIN): the server runs the calls after it as soon as it
    returns, which is how a blocked consumer gets its job one round trip after a wake-up.
    """

    calls: tuple[ScriptCall | Command, ...]


@dataclass(frozen=True, slots=True)
class WaitCall:
    """Block until one of ``keys`` (wake markers) is signalled or ``timeout`` seconds
    pass; the reply is sent back (None on timeout)."""

    keys: Sequence[str]
    timeout: float


Request: TypeAlias = ScriptCall | Pipeline | WaitCall | Command
Op = Generator[Request, Any, T]
