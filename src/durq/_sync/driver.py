"""Runs protocol requests on a redis-py client.

GENERATED from durq/_async/driver.py by scripts/unasync.py: edit that file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from redis import Redis
from redis.exceptions import NoScriptError, ResponseError

from durq.errors import DurqError
from durq.protocol.calls import Command, Op, Pipeline, Request, ScriptCall, WaitCall
from durq.protocol.ops import block_timeout, script_error

__all__ = ["Driver"]

T = TypeVar("T")
Wire = tuple[Any, ...]


def _evalsha(call: ScriptCall) -> Wire:
    return ("EVALSHA", call.script.sha, len(call.keys), *call.keys, *call.args)


class Driver:
    """Executes the requests of protocol operations.

    Scripts run with EVALSHA. A script unknown to the server (first use, or after a
    restart or SCRIPT FLUSH) is loaded with SCRIPT LOAD and the call repeated once; a
    pipeline loads its scripts before it is sent and repeats, in order, any call that
    still got NOSCRIPT.

    With a plain ``Redis`` client the commands go straight through a pooled connection
    (redis-py's packer and parser): the client's per-command wrapper costs about as much
    as a loopback round trip, and durq runs its own retry policy anyway. Other clients
    (Cluster) are driven through their public ``execute_command``.
    """

    def __init__(self, client: Redis) -> None:
        self.client = client
        self._loaded: set[str] = set()
        self._direct = type(client) is Redis and client.connection is None

    def run(self, op: Op[T]) -> T:
        """Drive ``op`` to completion and return its result."""
        try:
            request = next(op)
            while True:
                reply = self.execute(request)
                request = op.send(reply)
        except StopIteration as stop:
            result: T = stop.value
            return result
        finally:
            op.close()

    def run_all(self, ops: Sequence[Op[Any]]) -> list[Any]:
        """Run several operations at once: their first requests, when all are script
        calls, go in one round trip (one pipeline); any later request of an operation
        runs on its own. Each result is the operation's value, or the exception it
        raised (connection errors propagate: nothing is known then)."""
        firsts = [next(op) for op in ops]
        calls = tuple(r for r in firsts if isinstance(r, ScriptCall))
        if len(calls) == len(firsts):
            replies = self._pipeline(Pipeline(calls))
        else:
            replies = [self.execute(r) for r in firsts]
        results: list[Any] = []
        for op, reply in zip(ops, replies, strict=True):
            try:
                request = op.throw(reply) if isinstance(reply, Exception) else op.send(reply)
                while True:
                    request = op.send(self.execute(request))
            except StopIteration as stop:
                results.append(stop.value)
            except (ResponseError, DurqError) as exc:
                results.append(exc)
            finally:
                op.close()
        return results

    def execute(self, request: Request) -> Any:
        """Execute one request and return its raw reply."""
        if isinstance(request, ScriptCall):
            return self._script(request)
        if isinstance(request, Pipeline):
            return self._pipeline(request)
        if isinstance(request, (WaitCall, Command)):
            if isinstance(request, WaitCall):
                command: Wire = ("BZPOPMIN", *request.keys, block_timeout(request.timeout))
            else:
                command = request.args
            reply = (self._send([command]))[0]
            if isinstance(reply, Exception):
                raise script_error(reply)  # e.g. a wake marker of another type
            return reply
        raise TypeError(f"not a protocol request: {request!r}")

    def _send(self, commands: Sequence[Wire]) -> list[Any]:
        """Send ``commands`` in one round trip; error replies come back in place."""
        # redis-py's connection layer is not fully annotated
        client: Any = self.client
        if not self._direct:
            if len(commands) == 1:
                try:
                    return [client.execute_command(*commands[0])]
                except ResponseError as exc:
                    return [exc]
            pipe = client.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command)
            replies: list[Any] = pipe.execute(raise_on_error=False)
            return replies
        pool = client.connection_pool
        conn = pool.get_connection()
        try:
            conn.send_packed_command(conn.pack_commands(commands), check_health=False)
            replies = []
            for _ in commands:
                try:
                    replies.append(conn.read_response())
                except ResponseError as exc:
                    replies.append(exc)
        except BaseException:
            # a half-read reply (error, timeout, cancellation) leaves the socket unusable
            conn.disconnect()
            raise
        finally:
            pool.release(conn)
        return replies

    def _load(self, calls: Sequence[ScriptCall]) -> None:
        sources = {call.script.sha: call.script.source for call in calls}
        for reply in self._send([("SCRIPT", "LOAD", src) for src in sources.values()]):
            if isinstance(reply, Exception):
                raise reply
        self._loaded.update(sources)

    def _script(self, call: ScriptCall) -> Any:
        if call.script.sha not in self._loaded:
            self._load([call])
        reply = (self._send([_evalsha(call)]))[0]
        if isinstance(reply, NoScriptError):  # the server lost its script cache
            self._load([call])
            reply = (self._send([_evalsha(call)]))[0]
        if isinstance(reply, ResponseError):
            raise script_error(reply)
        return reply

    def _pipeline(self, request: Pipeline) -> list[Any]:
        scripts = [c for c in request.calls if isinstance(c, ScriptCall)]
        missing = [c for c in scripts if c.script.sha not in self._loaded]
        if missing:
            self._load(missing)
        replies = self._send(
            [_evalsha(c) if isinstance(c, ScriptCall) else c.args for c in request.calls]
        )
        for i, (call, reply) in enumerate(zip(request.calls, replies, strict=True)):
            if isinstance(reply, NoScriptError) and isinstance(call, ScriptCall):
                replies[i] = self._script(call)
            elif isinstance(reply, ResponseError):
                replies[i] = script_error(reply)
        return replies
