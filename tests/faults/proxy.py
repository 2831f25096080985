"""A small TCP proxy that breaks connections on command, for the fault-injection tests.

It runs an asyncio loop in a thread of the test process and forwards every connection
made to its port to the server. Faults, applied from the test's thread:

- ``reset()``: every open connection is cut with a TCP RST (SO_LINGER 0), both ways;
- ``drop_replies(n)``: the next ``n`` chunks the server sends back are discarded and
  their connections reset: the server executed the command, the client never learns
  it (a reply lost in the network);
- ``blackhole(seconds)``: nothing is forwarded for a while, in either direction, and
  the connections stay open (a partition that heals before TCP gives up); held bytes
  are delivered afterwards, as TCP would.

Otherwise it passes bytes through unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from typing import Any

__all__ = ["ChaosProxy"]

_RST = struct.pack("ii", 1, 0)


class _Link:
    """One client connection and its upstream connection."""

    def __init__(self, client: asyncio.StreamWriter, upstream: asyncio.StreamWriter) -> None:
        self.client = client
        self.upstream = upstream
        self.cut = False

    def reset(self) -> None:
        if self.cut:
            return
        self.cut = True
        for writer in (self.client, self.upstream):
            sock = writer.get_extra_info("socket")
            with contextlib.suppress(OSError):
                if sock is not None:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RST)
            writer.transport.abort()


class ChaosProxy:
    """Forwards ``127.0.0.1:<port>`` to ``host:port``; see the module docstring."""

    def __init__(self, host: str, port: int, name: str = "proxy") -> None:
        self.target = (host, port)
        self.name = name
        self.port = 0
        self.links: set[_Link] = set()
        self.connections = 0
        self.resets = 0
        self.dropped = 0
        self.blackholes = 0
        self._drop = 0
        self._loop = asyncio.new_event_loop()
        self._open: asyncio.Event | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def __repr__(self) -> str:
        return (
            f"<{self.name} :{self.port} conns={self.connections} resets={self.resets} "
            f"dropped={self.dropped} blackholes={self.blackholes}>"
        )

    # -- control (from any thread) -----------------------------------------------------

    def start(self) -> ChaosProxy:
        self._thread.start()
        self._call(self._start())
        return self

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def reset(self) -> int:
        """Cut every open connection; returns how many."""
        count: int = self._call(self._reset())
        return count

    def drop_replies(self, n: int = 1) -> None:
        """Discard the next ``n`` reply chunks, resetting their connections."""
        self._loop.call_soon_threadsafe(self._arm, n)

    def blackhole(self, seconds: float) -> None:
        """Forward nothing for ``seconds`` (returns at once)."""
        self._loop.call_soon_threadsafe(self._hold, seconds)

    def heal(self) -> None:
        """Forward again, and forget armed drops."""
        self._loop.call_soon_threadsafe(self._heal)

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    # -- inside the loop ---------------------------------------------------------------

    async def _start(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _close(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._reset()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _reset(self) -> int:
        links = list(self.links)
        for link in links:
            link.reset()
        self.resets += len(links)
        return len(links)

    def _arm(self, n: int) -> None:
        self._drop += n

    def _hold(self, seconds: float) -> None:
        assert self._open is not None
        self.blackholes += 1
        self._open.clear()
        self._loop.call_later(seconds, self._open.set)

    def _heal(self) -> None:
        assert self._open is not None
        self._drop = 0
        self._open.set()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        link = _Link(writer, up_writer)
        self.links.add(link)
        self.connections += 1
        pumps = [
            asyncio.create_task(self._pipe(reader, up_writer, link, reply=False)),
            asyncio.create_task(self._pipe(up_reader, writer, link, reply=True)),
        ]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in pumps:
                task.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            self.links.discard(link)
            if not link.cut:
                for w in (writer, up_writer):
                    w.close()

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: _Link, reply: bool
    ) -> None:
        assert self._open is not None
        with contextlib.suppress(OSError, ConnectionError):
            while True:
                data = await reader.read(65536)
                if not data:
                    return
                await self._open.wait()
                if link.cut:
                    return
                if reply and self._drop > 0:
                    self._drop -= 1
                    self.dropped += 1
                    self.resets += 1
                    link.reset()
                    return
                writer.write(data)
                await writer.drain()
