"""Exceptions raised by durq.

    DurqError
    ├── InvalidArgument (also a ValueError): an argument or option out of range
    │   └── PayloadError: a payload cannot be stored or read back
    │       ├── PayloadTooLarge: over the queue's max_payload_bytes
    │       ├── NotSerializable (also a TypeError): a value the serializer cannot encode
    │       └── PayloadRefused: a codec the queue does not accept (pickle not chosen)
    ├── LeaseLost: the caller no longer holds the job's lease (fencing)
    ├── JobNotFound: no job with this id
    ├── CorruptQueue: a durq key holds another Redis type, or a record is unreadable
    └── ForeignLibrary: code that is not durq's holds the names of durq's Functions

Connection problems surface as redis-py's ``redis.exceptions.ConnectionError`` and
``TimeoutError``; durq never puts credentials in its own messages.
"""

from __future__ import annotations

__all__ = [
    "CorruptQueue",
    "DurqError",
    "ForeignLibrary",
    "InvalidArgument",
    "JobNotFound",
    "LeaseLost",
    "NotSerializable",
    "PayloadError",
    "PayloadRefused",
    "PayloadTooLarge",
]


class DurqError(Exception):
    """Base class of every error durq raises itself."""


class InvalidArgument(DurqError, ValueError):
    """An argument or option is out of range or of the wrong kind."""


class PayloadError(InvalidArgument):
    """A payload cannot be stored, or a stored payload cannot be read back."""


class PayloadTooLarge(PayloadError):
    """The encoded payload is larger than the queue's ``max_payload_bytes``."""


class NotSerializable(PayloadError, TypeError):
    """The serializer cannot encode a value; the message names where it is."""


class PayloadRefused(PayloadError):
    """The payload was stored with a codec this queue does not accept (e.g. pickle)."""


class LeaseLost(DurqError):
    """The lease on a job is no longer held by the caller.

    The lease expired and the job was handed to another consumer, or the job was
    already released, requeued or deferred. Nothing was changed: a job is completed
    by one holder only.
    """

    def __init__(self, job_id: str, detail: str = "") -> None:
        self.job_id = job_id
        super().__init__(
            f"lease lost on job {job_id!r}: it expired and the job was handed out again, "
            f"or it is no longer active{detail}"
        )


class JobNotFound(DurqError):
    """No job with this id exists in the queue."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        super().__init__(f"no job {job_id!r} in this queue")


class CorruptQueue(DurqError):
    """A durq key holds another Redis type, or a job record cannot be read.

    Something other than durq wrote into the queue's keys. Jobs are never left half-moved
    by it; ``Queue.check()`` (or ``durq doctor``) lists the offending keys.
    """


class ForeignLibrary(DurqError):
    """The server holds code that is not durq's under the names of durq's Functions.

    durq's Redis Functions library and its functions have fixed, public names
    (``durq_<hash>``), and a function runs with the permissions of whoever calls it. So
    before its first FCALL on a server, durq reads the library back (``FUNCTION LIST
    ... WITHCODE``) and refuses to call it unless the code is exactly its own: a user
    allowed ``FUNCTION LOAD`` could otherwise have durq's callers (an operator, the
    dashboard, a worker) run code of theirs with their permissions. Nothing was run.
    docs/deployment.md ("AUTH and ACL") says how to deny ``FUNCTION LOAD`` to all but an
    admin.
    """

    def __init__(self, library: str, detail: str) -> None:
        self.library = library
        super().__init__(
            f"the Redis Functions library {library} on this server is not durq's own "
            f"({detail}); durq refuses to call it. Find out who loaded it (ACL LOG; the "
            "users allowed FUNCTION LOAD), delete it (FUNCTION DELETE), then load durq's "
            "with `durq functions load`; until then, DURQ_EVALSHA=1 runs durq's scripts "
            "by their hash instead"
        )
