"""Reading job records, the binary values of the ``jobs`` hash (``lua/lib/core/record_layout``).

Layout, big-endian: version B, state B, priority b, codec B, attempts H, max_attempts H,
deliveries I, failures H, enqueued_at 6 bytes, dequeued_at 6 bytes, requeued_at 6 bytes,
flags B (33 bytes); then len(group) B, group, len(key) B, key, payload. A held record
(state 9 once read) is stored as delayed (2) with the flag ``FLAG_HELD``, so that durq
0.1.0 reads it (docs/decisions/held-records.md).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

__all__ = [
    "FIXED_SIZE",
    "FLAG_HELD",
    "PLAIN",
    "STATE_NAMES",
    "Record",
    "RecordFields",
    "parse_record",
    "record_fields",
    "token_of",
]

_FIXED = struct.Struct(">BBbBHHIHHIHIHIB")
_DELAYED, _HELD = 2, 9
FLAG_HELD = 16  # lua/lib/core/record_layout.lua
FIXED_SIZE = _FIXED.size  # 33
VERSION = 1
STATE_NAMES = {
    1: "pending",
    2: "delayed",
    3: "active",
    4: "dead",
    5: "completed",
    6: "superseded",
    7: "cancelled",
    8: "expired",
    9: "held",
}


class Record(NamedTuple):
    """A decoded record header and the slices that follow it."""

    state: int
    priority: int
    codec: int
    attempts: int
    max_attempts: int
    deliveries: int
    failures: int
    enqueued_at_ms: int
    dequeued_at_ms: int
    requeued_at_ms: int
    flags: int
    group: str
    key: str
    payload_offset: int


RecordFields = tuple[int, int, int, int, int, int, int, int, int, int, int, str, str, int]
"""A record's fields in ``Record``'s order, as a plain tuple (``record_fields``)."""

_EMPTY_SLICES = FIXED_SIZE + 2  # where the payload starts when there is no group or key

#: the head of a record as a fetch reads it (``lifecycle.parse_dequeue``): version,
#: state, priority, codec, attempts, max_attempts, deliveries, enqueued_at and
#: dequeued_at (high and low parts), then the lengths of group and key (failures,
#: requeued_at and flags skipped); with both lengths 0, the payload starts at
#: ``PLAIN.size``. One unpack per record and no tuple of every field (``record_fields``)
#: for most fetched jobs.
PLAIN = struct.Struct(">BBbBHHI2xHIHI7xBB")
assert PLAIN.size == _EMPTY_SLICES


def record_fields(raw: bytes, errors: str = "strict") -> RecordFields | None:
    """The fields of a record in ``Record``'s order, as a plain tuple (no named tuple
    made: a worker reads one per job it fetches); None when it is not a readable durq
    record. ``errors``: see ``parse_record``."""
    if len(raw) < _EMPTY_SLICES:
        return None
    (ver, state, prio, codec, attempts, maxatt, deliveries, failures,
     eh, el, dh, dl, rh, rl, flags) = _FIXED.unpack_from(raw)  # fmt: skip
    if ver != VERSION or state not in STATE_NAMES:
        return None
    if state == _DELAYED and flags & FLAG_HELD:
        state = _HELD
    glen = raw[FIXED_SIZE]
    if glen == 0 and raw[FIXED_SIZE + 1] == 0:  # no group, no key: most jobs
        group = key = ""
        end = _EMPTY_SLICES
    else:
        kpos = FIXED_SIZE + 1 + glen
        if kpos >= len(raw):
            return None
        klen = raw[kpos]
        end = kpos + 1 + klen
        if end > len(raw):
            return None
        try:
            group = raw[FIXED_SIZE + 1 : kpos].decode(errors=errors)
            key = raw[kpos + 1 : end].decode(errors=errors)
        except UnicodeDecodeError:
            return None
    return (
        state, prio, codec, attempts, maxatt, deliveries, failures,
        (eh << 32) | el, (dh << 32) | dl, (rh << 32) | rl, flags, group, key, end,
    )  # fmt: skip


def parse_record(raw: bytes, *, errors: str = "strict") -> Record | None:
    """Decode a record; None when it is not a readable durq record.

    ``errors`` says how group and key bytes that are not UTF-8 are decoded: with
    "strict" the record is unreadable. The scripts do not look at the encoding, so the
    records a script hands out are read with "replace" (see ``lifecycle.parse_dequeue``).
    """
    fields = record_fields(raw, errors)
    return None if fields is None else Record._make(fields)


def token_of(record: Record) -> str:
    """The lease token of a delivered record: ``<deliveries>.<dequeued_at_ms>``."""
    return f"{record.deliveries}.{record.dequeued_at_ms}"
