"""What the worker and its children say to each other: messages framed on a Unix
stream socket (a 4-byte length, then the message pickled).

Both ends are processes of one worker (a child is a fork of the worker's template), so
pickle here carries nothing a task did not already run with; a job's payload crosses as
the bytes stored in Redis and is decoded in the child, as a thread would decode it.

The worker -> a child:
    ("run", seq, job fields)   run this job (``job_fields``); one at a time, sent only
                               to an idle child: nothing ever waits in a child's socket
    ("cancel", seq)            a cancel of job ``seq`` was asked (``Job.cancelled``)
    ("lost", seq)              job ``seq``'s lease was taken over (``Job.progress`` raises
                               LeaseLost)
A child -> the worker:
    ("ready", pid)             forked and listening
    ("progress", seq, fraction, info)
    ("done", seq, outcome, rss)  the job ended: ``Outcome`` fields, resident bytes after it
Closing the worker's end tells a child to exit (it does between jobs).
"""

from __future__ import annotations

import pickle
import socket
import struct
from typing import Any

from durq.models import Job

__all__ = ["Channel", "Frames", "frame", "job_fields", "make_job"]

_LENGTH = struct.Struct(">I")


def frame(message: tuple[Any, ...]) -> bytes:
    """``message`` as it goes on the socket."""
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(body)) + body


class Frames:
    """Messages out of a byte stream that arrives in pieces."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[Any, ...]]:
        """Take ``data`` in; the messages it completes, in order."""
        buffer = self._buffer
        buffer += data
        out: list[tuple[Any, ...]] = []
        start = 0
        while len(buffer) - start >= 4:
            (size,) = _LENGTH.unpack_from(buffer, start)
            end = start + 4 + size
            if len(buffer) < end:
                break
            out.append(pickle.loads(buffer[start + 4 : end]))
            start = end
        if start:
            del buffer[:start]
        return out


class Channel:
    """A child's end of its socket (blocking): messages in and out."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(True)
        self.sock = sock
        self._frames = Frames()
        self._inbox: list[tuple[Any, ...]] = []

    def send(self, message: tuple[Any, ...]) -> None:
        self.sock.sendall(frame(message))

    def recv(self) -> tuple[Any, ...] | None:
        """The next message, waiting for it; None once the worker closed its end."""
        while not self._inbox:
            data = self.sock.recv(1 << 16)
            if not data:
                return None
            self._inbox.extend(self._frames.feed(data))
        return self._inbox.pop(0)

    def poll(self) -> list[tuple[Any, ...]]:
        """The messages that arrived, without waiting (a task asking for its flags)."""
        while True:
            try:
                data = self.sock.recv(1 << 16, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                break
            if not data:
                break
            self._inbox.extend(self._frames.feed(data))
        out, self._inbox = self._inbox, []
        return out


def job_fields(job: Job) -> tuple[Any, ...]:
    """What a child needs to make ``job`` again (``make_job``)."""
    return (
        job.queue, job.id, job.token, job.attempt, job.max_attempts, job.deliveries,
        job.priority, job.group, job.key, job.enqueued_at, job.lease_deadline, job.codec_id,
        job.data,
    )  # fmt: skip


def make_job(fields: tuple[Any, ...], codec: Any) -> Job:
    """The job of ``job_fields``, decoding its payload with ``codec`` (the app's)."""
    (queue, id, token, attempt, max_attempts, deliveries, priority, group, key, enqueued_at,
     lease_deadline, codec_id, data) = fields  # fmt: skip
    return Job(queue, id, token, attempt, max_attempts, deliveries, priority, group, key,
               enqueued_at, lease_deadline, codec_id, data, codec)  # fmt: skip
