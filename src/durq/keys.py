"""Key names: the only place where durq builds the names of its Redis keys.

A queue named ``emails`` keeps every key under the prefix ``durq:{emails}:``; the braces
are a Redis Cluster hash tag, so the whole queue lives in one slot and each Lua script
touches one slot only. A name with a slash, ``uploads/thumbs``, puts that queue in the
slot of ``uploads`` (prefix ``durq:{uploads}/thumbs:``): topics use this so one script
can reach a topic and its subscriber queues.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from durq.errors import InvalidArgument

__all__ = [
    "QueueKeys",
    "TopicKeys",
    "check_group",
    "check_job_id",
    "check_key",
    "check_queue_name",
]

_PART = r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}"
_QUEUE_NAME = re.compile(rf"^{_PART}(/{_PART})?$")
_NAMESPACE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
# the order of the key vector, shared with src/durq/lua/lib/keys.lua
VECTOR_PARTS: tuple[str, ...] = (
    "jobs",
    "rr",
    "rrset",
    "active",
    "delayed",
    "dead",
    "done",
    "reasons",
    "keys",
    "stats",
    "conf",
    "wake",
    "groups",
    "gactive",
    "glimit",
    "gweight",
)


def check_queue_name(name: str) -> str:
    """Return ``name`` if it is a valid queue name, else raise InvalidArgument."""
    if not isinstance(name, str) or not _QUEUE_NAME.match(name):
        raise InvalidArgument(
            f"invalid queue name {name!r}: use 1-128 letters, digits, '.', '_' or '-' "
            "(starting with a letter or digit), optionally 'parent/child'"
        )
    return name


def _check_label(kind: str, value: str, limit: int) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"{kind} must be a non-empty string, got {value!r}")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise InvalidArgument(f"{kind} {value[:40]!r}... is {size} bytes; the limit is {limit}")
    if any(ord(c) < 32 or ord(c) == 127 or 0xD800 <= ord(c) <= 0xDFFF for c in value):
        raise InvalidArgument(f"{kind} {value!r} contains control or surrogate characters")
    return value


def check_job_id(job_id: str) -> str:
    """Return ``job_id`` if valid: 1-200 bytes of UTF-8, no control characters."""
    return _check_label("job id", job_id, 200)


def check_group(group: str) -> str:
    """Return ``group`` if valid: 1-200 bytes of UTF-8, no control characters."""
    return _check_label("group", group, 200)


def check_key(key: str) -> str:
    """Return the dedup ``key`` if valid: 1-250 bytes of UTF-8, no control characters."""
    return _check_label("key", key, 250)


@dataclass(frozen=True)
class QueueKeys:
    """The Redis key names of one queue."""

    name: str
    namespace: str = "durq"

    def __post_init__(self) -> None:
        check_queue_name(self.name)
        if not _NAMESPACE.match(self.namespace):
            raise InvalidArgument(f"invalid namespace {self.namespace!r}")

    @cached_property
    def prefix(self) -> str:
        """``<namespace>:{<tag>}<rest>:`` where the tag is the part before any slash."""
        tag, slash, rest = self.name.partition("/")
        return f"{self.namespace}:{{{tag}}}{slash}{rest}:"

    @cached_property
    def vector(self) -> tuple[str, ...]:
        """The KEYS every script receives: the prefix, then the fixed keys in order."""
        prefix = self.prefix
        return (prefix, *(prefix + part for part in VECTOR_PARTS))

    @property
    def wake(self) -> str:
        """The marker idle consumers block on."""
        return self.prefix + "wake"

    def result(self, job_id: str) -> str:
        """Where the result of job ``job_id`` is kept (a one-element list)."""
        return f"{self.prefix}result:{job_id}"

    def group_keys(self, group: str) -> tuple[str, str]:
        """The ready list and the priority zset of a group ('' is the default group)."""
        if group == "":
            return self.prefix + "pending", self.prefix + "prio"
        return f"{self.prefix}g:{group}", f"{self.prefix}gp:{group}"


@dataclass(frozen=True)
class TopicKeys:
    """The Redis key names of a topic. Its subscription ``s`` is the queue ``<topic>/s``,
    in the topic's slot, so one script reaches the topic and all its subscribers."""

    name: str
    namespace: str = "durq"

    def __post_init__(self) -> None:
        if "/" in self.name:
            raise InvalidArgument(f"a topic name cannot contain '/': {self.name!r}")
        QueueKeys(self.name, self.namespace)  # same rules as a queue name

    @cached_property
    def base(self) -> str:
        """``<namespace>:{<topic>}``: a subscription's prefix is ``base/<name>:``."""
        return f"{self.namespace}:{{{self.name}}}"

    @cached_property
    def subscribers(self) -> str:
        """The set of subscription names."""
        return self.base + ":topic:subs"

    def subscription(self, subscriber: str) -> str:
        """The queue name of a subscription."""
        name = f"{self.name}/{subscriber}"
        check_queue_name(name)
        return name
