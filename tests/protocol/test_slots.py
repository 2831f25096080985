"""The hash slot computation that the IO-free layers use agrees with Redis Cluster's."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from redis.crc import key_slot

from durq.slots import SLOTS, slot_of
from durq.transport import cluster


def test_known_slots() -> None:
    assert SLOTS == 16384
    assert slot_of("123456789") == 0x31C3  # the CRC16/XMODEM check value
    assert slot_of("foo") == 12182
    # a hash tag decides; an empty tag ("{}") does not count, so the whole key does
    assert slot_of("{user1000}.following") == slot_of("{user1000}.followers") == slot_of("user1000")
    assert slot_of("foo{}{bar}") == slot_of(b"foo{}{bar}") != slot_of("bar")
    assert slot_of("foo{{bar}}zap") == slot_of("{bar")


@given(st.text() | st.binary())
def test_slot_of_agrees_with_redis_py(key: str | bytes) -> None:
    raw = key.encode("utf-8", "surrogatepass") if isinstance(key, str) else key
    assert slot_of(raw) == key_slot(raw)


def test_the_drivers_use_the_same_function() -> None:
    assert cluster.slot_of is slot_of
