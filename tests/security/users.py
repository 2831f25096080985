"""Redis ACL users made from the documented rules (tests/security/acl_rules.py)."""

from __future__ import annotations

from typing import Any

import redis


def command(client: redis.Redis, *args: Any) -> Any:
    return client.execute_command(*args)  # type: ignore[no-untyped-call]  # redis-py: untyped


def acl_user(server_url: str, name: str, rule: str, password: str) -> str:
    """Create (or reset) user ``name`` with ``rule``; return its URL. On Redis 6.2 the
    Functions commands, which it does not know, are left out."""
    admin = redis.Redis.from_url(server_url)
    try:
        words = rule.format(password=password).split()
        if int(str(admin.info("server")["redis_version"]).split(".")[0]) < 7:
            words = [w for w in words if not w.startswith(("+fcall", "+function"))]
        command(admin, "ACL", "SETUSER", name, "reset", *words)
    finally:
        admin.close()
    host_port = server_url.split("//", 1)[1].split("/", 1)[0]
    return f"redis://{name}:{password}@{host_port}/0"


def denials(server_url: str, *users: str) -> list[dict[bytes, object]]:
    """The server's ACL LOG entries of ``users``."""
    admin = redis.Redis.from_url(server_url)
    try:
        entries = list(command(admin, "ACL", "LOG", 50))
    finally:
        admin.close()
    names = {u.encode() for u in users}
    return [e for e in entries if e[b"username"] in names]
