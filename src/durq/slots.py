"""Redis Cluster hash slots, computed without any IO import.

The key names (``durq.keys``) choose shard tags by their slot, and the IO-free protocol
layer imports the key names: the slot computation must not pull in a Redis client.
"""

from __future__ import annotations

from binascii import crc_hqx

__all__ = ["SLOTS", "slot_of"]

#: the number of hash slots of a Redis Cluster
SLOTS = 16384


def slot_of(key: str | bytes) -> int:
    """The hash slot of ``key``: CRC16 (XMODEM) of its hash tag, the part between the
    first ``{`` and the next ``}`` when that part is not empty, else of the whole key."""
    raw = key.encode() if isinstance(key, str) else key
    start = raw.find(b"{")
    if start > -1:
        end = raw.find(b"}", start + 1)
        if end > start + 1:
            raw = raw[start + 1 : end]
    return crc_hqx(raw, 0) % SLOTS
