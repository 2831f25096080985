"""Server settings that put jobs at risk, checked when a worker starts (``durq doctor``).

- ``maxmemory-policy`` other than ``noeviction``: under memory pressure Redis may evict
  durq's keys (a job record, a lease set), and jobs vanish without an error.
- No persistence (no AOF, no RDB snapshots): a restart of Redis loses every job.
- ``appendfsync no`` or ``everysec``: a power loss (not a process crash) can lose the
  last second or so of acknowledged writes; only ``always`` (or durq.Durability with
  fsync) closes that window.
"""

from __future__ import annotations

from durq.protocol.calls import Command, Op, reply_or_error

__all__ = ["server_warnings"]


def _info(raw: object) -> dict[str, str]:
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    fields: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep:
            fields[name.strip()] = value.strip()
    return fields


def server_warnings() -> Op[list[tuple[str, str]]]:
    """Read the server's settings; return ``(level, message)`` pairs, level being
    ``warning`` (jobs can be lost) or ``info``."""
    memory = _info((yield Command(("INFO", "memory"))))
    persistence = _info((yield Command(("INFO", "persistence"))))
    out: list[tuple[str, str]] = []
    policy = memory.get("maxmemory_policy", "noeviction")
    if policy != "noeviction":
        out.append(
            (
                "warning",
                f"maxmemory-policy is {policy}: under memory pressure Redis "
                "may evict durq's keys and jobs would vanish silently; set it to "
                "noeviction (enqueues then fail with an OOM error instead)",
            )
        )
    aof = persistence.get("aof_enabled") == "1"
    save: str | None = None
    # CONFIG may be renamed or denied by ACL: then we cannot tell
    reply = yield from reply_or_error("CONFIG", "GET", "save")
    if isinstance(reply, list) and len(reply) == 2:
        save = reply[1].decode() if isinstance(reply[1], bytes) else str(reply[1])
    if not aof and save == "":
        out.append(
            (
                "warning",
                "persistence is off (no AOF, no RDB snapshots): a restart "
                "of Redis loses every queued job; set appendonly yes",
            )
        )
    elif not aof:
        out.append(
            (
                "info",
                "only RDB snapshots: a crash of Redis loses the writes since "
                "the last snapshot; appendonly yes keeps them",
            )
        )
    return out
