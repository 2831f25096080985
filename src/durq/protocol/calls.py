"""The requests an operation yields to its driver, and the plumbing shared by the ops.

The request types (ScriptCall, Command, Pipeline, WaitCall, Sleep) and the Op generator type;
how an operation builds its script calls (one per batch of at most MAX_BATCH items, or
CHUNK items for the scripts whose items cost more, all in one round trip); how long a
blocking command may block; and how a driver turns a script's error reply into a durq
exception.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, TypeAlias, TypeVar

from durq import lua
from durq.errors import CorruptQueue, InvalidArgument
from durq.keys import QueueKeys
from durq.lua import Script

__all__ = [
    "CHUNK",
    "IDLE_BLOCK",
    "MAX_BATCH",
    "MAX_BLOCK",
    "MAX_CALL_BYTES",
    "MIN_BLOCK",
    "Command",
    "Op",
    "Pipeline",
    "Request",
    "ScriptCall",
    "Sleep",
    "WaitCall",
    "batched",
    "block_timeout",
    "chunk_of",
    "chunked",
    "reply_or_error",
    "script_call",
    "script_error",
    "send_all",
    "text",
]

T = TypeVar("T")
R = TypeVar("R", bound=Sequence[Any])
Arg: TypeAlias = str | bytes | int | float

#: the most items one script call handles; a larger batch is several calls
MAX_BATCH = 1000
#: the items per call of the scripts whose items cost more: each size keeps one call near
#: 1 ms of server time in the costliest case of its options (a dedup key, a control
#: mode, a group, a record rewritten: docs/decisions/batch-sizes.md), a few ms on a busy
#: machine, far under the 10 ms any call may take (docs/design.md, "Cost of each operation";
#: tests/lua/test_script_bounds.py drives each at its limit, timed by the server's CPU).
#: A larger batch is several calls in one round trip, as over MAX_BATCH
CHUNK: dict[str, int] = {
    "enqueue_plain": 500,
    "enqueue_plain_grouped": 125,  # enqueue_plain with groups: a group costs commands
    "enqueue": 100,
    "enqueue_control": 50,
    "release": 125,
    "requeue": 64,
    "defer": 64,
    "hold": 64,
    "extend": 250,
    "rate_limited": 100,
    "settle": 64,  # a batch's items (durq.Batch), any outcome: as requeue; done: as release
    "cancel": 100,
    "replay": 100,
    "purge": 125,
    "configure": 125,  # settings
    "groups": 250,
    "dead_letters": 250,  # records read
    "schedule_list": 50,  # schedules listed
}


#: the most bytes of long values (reasons, results) one call of release, requeue or settle
#: carries: a call copies and stores each, about 1.5 ms of server time a MB on a busy
#: machine (64 requeues of 64 KB reasons: 5-8 ms, docs/decisions/batch-sizes.md). Past it
#: a batch takes more calls, as past CHUNK; one item larger than this goes alone
MAX_CALL_BYTES = 512 * 1024


def chunked(rows: Sequence[R], size: int, max_bytes: int | None = None) -> list[Sequence[R]]:
    """``rows`` in chunks of at most ``size`` rows and, when ``max_bytes`` is given, at
    most ``max_bytes`` of their ``bytes`` values (a row larger than that alone); ``[[]]``
    for no rows (a call is made all the same)."""
    if max_bytes is None:
        return [rows[i : i + size] for i in range(0, len(rows), size)] or [[]]
    chunks: list[Sequence[R]] = []
    start = weight = 0
    for i, row in enumerate(rows):
        cost = sum(len(v) for v in row if type(v) is bytes)
        if i > start and (i - start == size or weight + cost > max_bytes):
            chunks.append(rows[start:i])
            start, weight = i, 0
        weight += cost
    chunks.append(rows[start:])
    return chunks


def chunk_of(name: str) -> int:
    """The most items one call of script ``name`` takes (CHUNK, else MAX_BATCH)."""
    return CHUNK.get(name, MAX_BATCH)


#: the longest single blocking wait; longer waits are several, so a dead server is noticed
MAX_BLOCK = 5.0
#: the longest wait of an idle consumer (a worker's queue or outbox with nothing due:
#: docs/design.md, "Blocking without polling"). Longer than MAX_BLOCK, so that an idle
#: worker sends nothing but its heartbeat. The connection is not idle meanwhile: durq's
#: TCP keepalive probes it after 60 s (transport.connection.keepalive_options), which
#: keeps load balancers and NAT gateways from dropping it and finds a peer that
#: vanished; the exchange's own timeout (the socket timeout on top of the wait) bounds
#: the rest.
IDLE_BLOCK = 3600.0
#: the shortest server-side block: Redis 6.2 truncates a blocking timeout to whole ms,
#: and one that truncates to 0 (0.001 s is stored as 0.000999...) means "block forever"
MIN_BLOCK = 0.002


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


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait ``seconds`` without Redis (None is sent back): a short wait for work that is
    due then, e.g. the next start a rate limit allows. A blocking command's timeout is
    ended by the server only ``hz`` times a second (up to 100 ms late by default), which
    would lose most of a short wait's precision."""

    seconds: float


Request: TypeAlias = ScriptCall | Pipeline | WaitCall | Command | Sleep
Op = Generator[Request, Any, T]


def script_call(name: str, keys: QueueKeys, args: Sequence[Arg]) -> ScriptCall:
    """A call of script ``name`` (see ``durq.lua``) on the queue ``keys``."""
    return ScriptCall(lua.load(name), keys.vector, args)


def batched(
    name: str,
    keys: QueueKeys,
    head: Sequence[Arg],
    rows: Sequence[Sequence[Arg]],
    tail: Command | None = None,
    size: int | None = None,
    max_bytes: int | None = None,
) -> Op[list[Any]]:
    """Run a per-item script over ``rows`` in calls of at most ``size`` items (default
    ``chunk_of(name)``) and ``max_bytes`` of their bytes values (``chunked``), in one round
    trip; returns the replies in order. ``tail`` (e.g. WAIT) is sent last on the same
    connection and its reply appended."""
    chunks = chunked(rows, size or chunk_of(name), max_bytes)
    calls: tuple[ScriptCall | Command, ...] = tuple(
        script_call(name, keys, [*head, len(chunk), *chain.from_iterable(chunk)])
        for chunk in chunks
    )
    if tail is not None:
        calls = (*calls, tail)
    if len(calls) == 1:
        return [(yield calls[0])]
    replies = yield Pipeline(calls)
    for reply in replies[: len(chunks)]:
        if isinstance(reply, Exception):
            raise reply
    return list(replies)


def send_all(calls: Sequence[ScriptCall | Command]) -> Op[list[Any]]:
    """Send ``calls`` in one round trip (one request, or a pipeline of them) and return
    their replies in order; an error reply is raised."""
    if len(calls) == 1:
        return [(yield calls[0])]
    replies = list((yield Pipeline(tuple(calls))))
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies


def block_timeout(seconds: float, longest: float = MAX_BLOCK) -> float:
    """The timeout to send with a blocking command (BZPOPMIN, BLMOVE) for a wait of
    ``seconds``: between MIN_BLOCK and ``longest``."""
    return min(max(seconds, MIN_BLOCK), longest)


def script_error(exc: Exception) -> Exception:
    """Translate a script's error reply into a durq exception (others pass through)."""
    message = str(exc)
    if "DURQ_WRONGTYPE" in message:  # the script found it before changing anything
        detail = message.split("DURQ_WRONGTYPE", 1)[-1].strip()
        return CorruptQueue(
            f"{detail}: something other than durq wrote there; nothing was changed, and "
            "calls that need the key fail until it is removed (see `durq doctor`)"
        )
    if "WRONGTYPE" in message:
        detail = message.split("DURQ_WRONGTYPE", 1)[-1].strip()
        return CorruptQueue(
            f"a durq key holds another Redis type ({detail}); run `durq doctor` to see which"
        )
    if "DURQ_ARG" in message:
        return InvalidArgument(message.split("DURQ_ARG", 1)[-1].strip())
    return exc


def reply_or_error(*args: Arg) -> Op[Any]:
    """The reply of the plain command ``args``, an error reply as the exception object
    rather than raised (a driver raises from a lone Command; a Pipeline's errors come
    back in place), for an op that handles a refusal itself."""
    replies = yield Pipeline((Command(args),))
    return replies[0]


def text(value: Any) -> str:
    """A reply (bytes) as text."""
    return value.decode() if isinstance(value, bytes) else str(value)
