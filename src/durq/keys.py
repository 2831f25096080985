"""Key names: the only place where durq builds the names of its Redis keys.

A queue named ``emails`` keeps every key under the prefix ``durq:{emails}:``; the braces
are a Redis Cluster hash tag, so the whole queue lives in one slot and each Lua script
touches one slot only. A name with a slash, ``uploads/thumbs``, puts that queue in the
slot of ``uploads`` (prefix ``durq:{uploads}/thumbs:``): topics use this so one script
can reach a topic and its subscriber queues.

A sharded queue ``emails`` of N shards is N queues, ``emails~0`` .. ``emails~<N-1>``,
each with a hash tag of its own chosen so that shard i's slot falls in the i-th N-th of
the slot range (``shard_tag``): on a cluster whose primaries own equal slot ranges, the
shards spread evenly over the primaries.

A namespace's own keys (``NamespaceKeys``) list what lives in it, for tools and workers:
``<ns>:queues`` (the queue names), ``<ns>:shards`` (sharded queues and their shard
counts), ``<ns>:workers`` (live worker ids) and ``<ns>:worker:<id>`` (a worker's
heartbeat).
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from functools import cache, cached_property

from durq.errors import InvalidArgument
from durq.slots import SLOTS, slot_of

__all__ = [
    "MAX_SHARDS",
    "NamespaceKeys",
    "OUTBOX_PART",
    "OutboxKeys",
    "QueueKeys",
    "TopicKeys",
    "check_group",
    "check_job_id",
    "check_key",
    "check_namespace",
    "check_queue_name",
    "check_shards",
    "shard_index",
    "shard_name",
    "shard_tag",
    "split_shard",
    "vector_of",
    "workflow_done_key",
    "workflow_key",
    "workflow_structure_key",
]

MAX_SHARDS = 256

_PART = r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}"
_QUEUE_NAME = re.compile(rf"^{_PART}(/{_PART})?$")
_NAMESPACE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
# the order of the key vector, shared with src/durq/lua/lib/core/keys.lua
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


def check_namespace(namespace: str) -> str:
    """Return ``namespace`` if valid: 1-64 letters, digits, '.', '_' or '-'."""
    if not isinstance(namespace, str) or not _NAMESPACE.match(namespace):
        raise InvalidArgument(f"invalid namespace {namespace!r}")
    return namespace


def check_queue_name(name: str) -> str:
    """Return ``name`` if it is a valid queue name, else raise InvalidArgument."""
    if not isinstance(name, str) or not _QUEUE_NAME.match(name):
        raise InvalidArgument(
            f"invalid queue name {name!r}: use 1-128 letters, digits, '.', '_' or '-' "
            "(starting with a letter or digit), optionally 'parent/child'"
        )
    return name


# control characters and lone surrogates: they do not survive a round trip as text
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")


def _check_label(kind: str, value: str, limit: int) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"{kind} must be a non-empty string, got {value!r}")
    # at most 4 bytes of UTF-8 per character: short values need no encoding to measure
    if len(value) * 4 > limit:
        size = len(value.encode("utf-8", "surrogatepass"))
        if size > limit:
            raise InvalidArgument(f"{kind} {value[:40]!r}... is {size} bytes; the limit is {limit}")
    if _UNPRINTABLE.search(value):
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


def check_shards(name: str, shards: int) -> int:
    """Return ``shards`` if ``name`` may have that many shards, else raise."""
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise InvalidArgument(f"shards must be an int in 1..{MAX_SHARDS}, got {shards!r}")
    if "/" in check_queue_name(name):
        raise InvalidArgument(f"a queue with '/' shares its parent's slot: {name!r} cannot "
                              "be sharded")  # fmt: skip
    return shards


def shard_index(key: str, shards: int) -> int:
    """The shard of a routing key (a group, a dedup key, a job id or a schedule's name):
    CRC-32, so every client and language agrees."""
    return zlib.crc32(key.encode("utf-8", "surrogatepass")) % shards


def shard_name(name: str, index: int) -> str:
    """The queue name of shard ``index`` of queue ``name``: ``name~index``."""
    return f"{name}~{index}"


def split_shard(name: str) -> tuple[str, int | None]:
    """``("emails", 2)`` for ``"emails~2"``; ``(name, None)`` for a name of no shard."""
    base, tilde, index = name.rpartition("~")
    if not tilde or not index.isdigit():
        return name, None
    return base, int(index)


@cache
def shard_tag(name: str, index: int, shards: int) -> str:
    """The hash tag of shard ``index`` of ``shards``: ``name~index``, salted
    (``name~index~k``) until its slot lies in the index-th N-th of the slot range."""
    tag = f"{name}~{index}"
    for salt in range(100_000):
        candidate = tag if salt == 0 else f"{tag}~{salt}"
        if slot_of(candidate) * shards // SLOTS == index:
            return candidate
    raise AssertionError("no tag found")  # about `shards` tries are needed on average


@dataclass(frozen=True)
class NamespaceKeys:
    """The Redis key names of a namespace: what lives in it, for tools and workers.

    These keys are in slots of their own (no hash tag): each is read or written by
    itself, never in one script with a queue's keys.
    """

    namespace: str = "durq"

    def __post_init__(self) -> None:
        check_namespace(self.namespace)

    @property
    def queues(self) -> str:
        """The set of the namespace's queue names (a sharded queue by its own name)."""
        return f"{self.namespace}:queues"

    @property
    def shards(self) -> str:
        """The hash of sharded queues: queue name -> shard count."""
        return f"{self.namespace}:shards"

    @property
    def workers(self) -> str:
        """The set of the ids of registered workers (some may be dead: see ``worker``)."""
        return f"{self.namespace}:workers"

    def worker(self, worker_id: str) -> str:
        """The heartbeat hash of worker ``worker_id``; it expires when the worker stops
        beating, which is how readers tell a dead worker from a live one."""
        return f"{self.namespace}:worker:{worker_id}"


@dataclass(frozen=True)
class QueueKeys:
    """The Redis key names of one queue.

    ``shard_count`` > 0 makes this shard ``i`` of a sharded queue: ``name`` is then
    ``<queue>~<i>`` (see ``shard_name``) and the hash tag is ``shard_tag``'s.
    """

    name: str
    namespace: str = "durq"
    shard_count: int = 0

    def __post_init__(self) -> None:
        if self.shard_count:
            base, index = split_shard(self.name)
            check_shards(base, self.shard_count)
            if index is None or index >= self.shard_count:
                raise InvalidArgument(
                    f"{self.name!r} is not a shard name of a queue of {self.shard_count} "
                    "shards (<queue>~<index>)"
                )
        else:
            check_queue_name(self.name)
        check_namespace(self.namespace)

    @cached_property
    def prefix(self) -> str:
        """``<namespace>:{<tag>}<rest>:`` where the tag is the part before any slash
        (a shard's tag: see ``shard_tag``)."""
        if self.shard_count:
            base, index = split_shard(self.name)
            return f"{self.namespace}:{{{shard_tag(base, index or 0, self.shard_count)}}}:"
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


# -- workflows (durq.app.workflows; the layout: src/durq/lua/lib/workflows/fan_in.lua)

OUTBOX_PART = "wfo:"  # shared with src/durq/lua/lib/core/outbox.lua


def vector_of(prefix: str) -> tuple[str, ...]:
    """The key vector of the queue whose prefix is ``prefix`` (as ``QueueKeys.vector``):
    what a script for that queue's slot receives when only its prefix is known."""
    return (prefix, *(prefix + part for part in VECTOR_PARTS))


def workflow_key(prefix: str, workflow_id: str) -> str:
    """The header of workflow ``workflow_id`` in its home queue (prefix ``prefix``): its
    state, run, plan; once it ended, its summary."""
    return f"{prefix}wf:{workflow_id}"


def workflow_structure_key(prefix: str, workflow_id: str, run: str) -> str:
    """The structure of run ``run`` of workflow ``workflow_id`` (lua/lib/workflows/fan_in.lua): the
    run is a fixed-length tag, so no two workflow ids share a key. A workflow of durq
    0.1.0 has no run (``""``): its structure is in its header's hash
    (lua/lib/workflows/legacy.lua)."""
    if not run:
        return workflow_key(prefix, workflow_id)
    return f"{prefix}wfs:{run}:{workflow_id}"


def workflow_done_key(prefix: str, workflow_id: str, run: str) -> str:
    """The set of the nodes of run ``run`` of workflow ``workflow_id`` that completed."""
    return f"{prefix}wfd:{run}:{workflow_id}"


@dataclass(frozen=True)
class OutboxKeys(QueueKeys):
    """The keys of a queue's workflow outbox: a queue of its own under
    ``<queue prefix>wfo:``, in the queue's slot, holding forwarding orders for other
    slots (see ``durq.worker.outbox``)."""

    @cached_property
    def prefix(self) -> str:
        """``<queue prefix>wfo:``."""
        return QueueKeys(self.name, self.namespace, self.shard_count).prefix + OUTBOX_PART
