"""The drivers' RESP packing: a script call's head is packed once and kept, and
every command packs to the bytes hiredis makes of it whole."""

from __future__ import annotations

from typing import Any

import hiredis

from durq.transport import packing

# hiredis's stubs take a tuple of one argument type
pack_command: Any = hiredis.pack_command
KEYS = tuple(f"durq:{{q}}:k{i}" for i in range(17))


def test_packed_commands_are_the_bytes_of_the_whole_command() -> None:
    commands = [
        ("FCALL", "durq_enqueue_single", 17, *KEYS, "abcdefghijklmnop", b'["t",[1],{}]', 20, 1),
        ("FCALL", "durq_enqueue_single", 17, *KEYS, "other", b"", 3, 2.5),
        ("EVALSHA", "a" * 40, 17, *KEYS, "abcdefghijklmnop", b"x", 20, 1),
        ("EVALSHA", "b" * 40, 2, "k1", "k2"),  # keys, no arguments
        ("FCALL", "f", 0),
        ("FCALL", "f", 0, "arg"),
        ("SET", "k", "v"),
        ("WAIT", 1, 100),
    ]
    for _ in range(2):  # the second time from the kept heads
        for command in commands:
            assert packing.pack([command]) == [pack_command(command)]
    assert packing.pack(commands) == [b"".join(pack_command(c) for c in commands)]


def test_a_call_that_moves_to_evalsha_packs_its_own_head() -> None:
    args = ("id", b"data", 20, 1)
    fcall = ("FCALL", "durq_enqueue_single", 17, *KEYS, *args)
    evalsha = ("EVALSHA", "c" * 40, 17, *KEYS, *args)
    assert packing.pack([fcall]) == [pack_command(fcall)]
    assert packing.pack([evalsha]) == [pack_command(evalsha)]
    assert packing.pack([fcall]) == [pack_command(fcall)]


def test_the_kept_heads_are_bounded() -> None:
    for i in range(packing.HEADS_MAX + 10):
        command = ("EVALSHA", f"{i:040d}", 1, "k", "v")
        assert packing.pack([command]) == [pack_command(command)]
    assert len(packing._HEADS) <= packing.HEADS_MAX
