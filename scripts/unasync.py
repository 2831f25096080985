#!/usr/bin/env python3
"""Generate the blocking front end (src/durq/_sync) from the asyncio one (src/durq/_async).

The asyncio files are the source of truth. This script rewrites them with a short list of
substitutions and writes the results to _sync/. With --check it writes nothing and
fails when a generated file differs from what is committed, or when a rule matched
nothing (a stale rule hides drift).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "src" / "durq" / "_async"
TARGET = ROOT / "src" / "durq" / "_sync"
FILES = (
    "__init__.py",
    "admin.py",
    "driver.py",
    "durable.py",
    "namespace.py",
    "queue.py",
    "retry.py",
    "sharded.py",
    "sharded_admin.py",
    "topic.py",
)

RULES: list[tuple[str, str]] = [
    (r"from redis\.asyncio import Redis as AsyncRedis", "from redis import Redis"),
    (r"redis\.asyncio\.Redis", "redis.Redis"),
    (r"redis-py asyncio client", "redis-py client"),
    (r"used from asyncio code", "used from blocking code"),
    (r"the asyncio front end", "the blocking front end"),
    (r"\bAsyncRedis\b", "Redis"),
    (r"\bAsyncQueue\b", "Queue"),
    (r"\bAsyncQueueAdmin\b", "QueueAdmin"),
    (r"\bAsyncQueueDurable\b", "QueueDurable"),
    (r"\bAsyncShardedQueue\b", "ShardedQueue"),
    (r"\bAsyncShardedQueueAdmin\b", "ShardedQueueAdmin"),
    (r"\bAsyncDriver\b", "Driver"),
    (r"\bAsyncNamespace\b", "Namespace"),
    (r"\bAsyncTopic\b", "Topic"),
    (r"Awaitable\[T\]", "T"),
    (r"Awaitable, ", ""),
    (r"\basync def\b", "def"),
    (r"\bawait ", ""),
    (r"__aenter__", "__enter__"),
    (r"__aexit__", "__exit__"),
    (r"\baclose\b", "close"),
    (r"durq\._async\b", "durq._sync"),
    (r"connection\.async_client\b", "connection.sync_client"),
    (r"from asyncio import sleep", "from time import sleep"),
    (r"\basync_node_pool\b", "sync_node_pool"),
    (r"\basync_refresh\b", "sync_refresh"),
    (r"\basync_exchange\b", "sync_exchange"),
]

# the "source of truth" note of an asyncio file, up to the end of its sentence (which may
# end a line or continue with another sentence: both are replaced by the generated note)
_DOC_NOTE = re.compile(r"This file is the source of truth;.*?drift\)\.\s", re.DOTALL)


def convert(text: str, name: str, used: set[int]) -> str:
    """Apply every rule to one file's text, recording which rules matched."""
    text = _DOC_NOTE.sub(
        f"GENERATED from durq/_async/{name} by scripts/unasync.py: edit that file.\n", text
    )
    for index, (pattern, replacement) in enumerate(RULES):
        text, count = re.subn(pattern, replacement, text)
        if count:
            used.add(index)
    return text


def main(argv: list[str]) -> int:
    check = "--check" in argv
    used: set[int] = set()
    stale: list[str] = []
    for name in FILES:
        generated = convert((SOURCE / name).read_text(), name, used)
        target = TARGET / name
        if check:
            if not target.exists() or target.read_text() != generated:
                stale.append(str(target.relative_to(ROOT)))
        else:
            TARGET.mkdir(exist_ok=True)
            target.write_text(generated)
    unused = [RULES[i][0] for i in range(len(RULES)) if i not in used]
    if unused:
        print("unasync: rules that matched nothing (remove them):", *unused, sep="\n  ")
        return 1
    if stale:
        print("unasync: generated files are out of date; run `python scripts/unasync.py`:",
              *stale, sep="\n  ")  # fmt: skip
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
