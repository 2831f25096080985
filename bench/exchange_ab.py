"""CPU per ``async_exchange`` round trip: this tree's against another tree's, in one process.

    .venv/bin/python bench/exchange_ab.py --a-src /work/main/src [--rounds 40] [--block 2000]

One fresh server (Valkey), one asyncio connection, two requests: ``PING`` (one reply)
and ``EVALSHA`` of a script returning a small nested array plus ``PING`` (two replies,
as a fetch and its companion). The other tree's ``durq/connection.py`` is loaded from
``--a-src`` as a module of its own, so both exchanges run on the same connection, the
same redis-py and the same interpreter; blocks of ``--block`` round trips alternate
A/B (the order flips every round) and each block's process CPU per round trip is
kept. Prints the median and minimum per side and the median of the paired A - B
differences, which is what stays meaningful on a machine shared with others.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import hiredis

from durq import connection
from durq.dev.server import RedisServer

SCRIPT = "return {1, ARGV[1], {'a', 'b', 'c'}}"
# hiredis's stubs type its argument as a 1-tuple
_pack: Any = hiredis.pack_command


def _other_tree(src: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "durq_connection_a", Path(src) / "durq" / "connection.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


async def _run(url: str, other: ModuleType, rounds: int, block: int) -> None:
    client = connection.async_client(url)
    conn = await client.connection_pool.get_connection()
    load = [_pack(("SCRIPT", "LOAD", SCRIPT))]
    sha = (await connection.async_exchange(conn, load, 1))[0].decode()
    evalsha = _pack(("EVALSHA", sha, 0, "x" * 200))
    cases: dict[str, tuple[list[bytes], int]] = {
        "PING": ([_pack(("PING",))], 1),
        "EVALSHA + PING": ([evalsha + _pack(("PING",))], 2),
    }
    sides: dict[str, Any] = {"A": other.async_exchange, "B": connection.async_exchange}
    for name, (packed, count) in cases.items():
        cpu: dict[str, list[float]] = {"A": [], "B": []}
        for exchange in sides.values():  # warm both
            for _ in range(block):
                await exchange(conn, packed, count)
        for r in range(rounds):
            for side in ("A", "B") if r % 2 == 0 else ("B", "A"):
                exchange = sides[side]
                started = time.process_time()
                for _ in range(block):
                    await exchange(conn, packed, count)
                cpu[side].append((time.process_time() - started) / block * 1e6)
        paired = statistics.median(a - b for a, b in zip(cpu["A"], cpu["B"], strict=True))
        shown = [f"{side} {statistics.median(v):.2f} (min {min(v):.2f})" for side, v in cpu.items()]
        print(f"{name}: µs of CPU per round trip: {', '.join(shown)}; A - B paired {paired:+.2f}")
    await client.connection_pool.release(conn)
    await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a-src", required=True, help="the other tree's src/ directory")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--block", type=int, default=2000, help="round trips per block")
    args = parser.parse_args()
    other = _other_tree(args.a_src)
    with RedisServer(flavor="valkey") as server:
        asyncio.run(_run(server.url, other, args.rounds, args.block))


if __name__ == "__main__":
    main()
