"""Constants that the scripts and the Python side both hold agree.

Each value lives once per language (a Lua file, a Python module) because each side must
read it without calling the other; these tests read the Lua files and compare. Status
codes and record states are compared in tests/protocol/test_status.py and test_record.py.
"""

from __future__ import annotations

import re
import struct
from importlib import resources
from typing import Any

import pytest
import redis

from durq import AsyncQueue, Queue, lua
from durq.dev.server import RedisServer
from durq.keys import VECTOR_PARTS, QueueKeys
from durq.protocol.record import VERSION, parse_record, token_of


def _python_side() -> tuple[dict[str, int], dict[str, str]]:
    """The settings' defaults and the key types as the protocol package holds them (the
    one place this file names their module)."""
    from durq.protocol import admin

    return admin.CONF_DEFAULTS, admin._KEY_TYPES


CONF_DEFAULTS, KEY_TYPES = _python_side()


def _lib(name: str) -> str:
    return resources.files("durq.lua").joinpath(f"{name}.lua").read_text(encoding="utf-8")


def _code(text: str) -> str:
    """``text`` without its comments (none of the files parsed here has '--' in a string)."""
    return re.sub(r"--.*", "", text)


# -- the key vector -------------------------------------------------------------------


def _vector_in_keys_lua() -> dict[str, int]:
    """K_NAME -> index into KEYS, from lib/core/keys.lua."""
    found = re.findall(r"^local (K_[A-Z]+) = KEYS\[(\d+)\]", _lib("lib/core/keys"), re.MULTILINE)
    return {name: int(index) for name, index in found}


def test_keys_lua_names_the_vector_in_the_order_of_keys_py() -> None:
    vector = _vector_in_keys_lua()
    assert vector.pop("K_PREFIX") == 1
    by_index = sorted(vector.items(), key=lambda item: item[1])
    assert [index for _, index in by_index] == list(range(2, len(VECTOR_PARTS) + 2))
    assert [name for name, _ in by_index] == [f"K_{part.upper()}" for part in VECTOR_PARTS]


def test_a_queue_key_vector_is_the_prefix_then_the_parts_in_order() -> None:
    keys = QueueKeys("q", "durq")
    assert keys.vector == (keys.prefix, *(keys.prefix + part for part in VECTOR_PARTS))


def test_bind_prefix_points_every_key_at_the_same_name_as_keys_py() -> None:
    code = _code(_lib("lib/core/bind_prefix"))
    assert re.search(r"^\s*K_PREFIX = p$", code, re.MULTILINE)
    bound: dict[str, str] = {}
    for names, values in re.findall(r"^\s*(K_[A-Z_, ]+?) = (p \.\. .+)$", code, re.MULTILINE):
        parts = re.findall(r"p \.\. '([a-z]+)'", values)
        assert len(parts) == len(names.split(",")), names
        bound.update(zip((n.strip() for n in names.split(",")), parts, strict=True))
    vector = _vector_in_keys_lua()
    del vector["K_PREFIX"]
    assert bound == {name: VECTOR_PARTS[index - 2] for name, index in vector.items()}


# -- the key types --------------------------------------------------------------------


def _key_types_in_lua() -> dict[str, str]:
    types = _lib("lib/core/types")
    table = re.search(r"^local KEY_TYPES = \{(.*?)^\}", types, re.MULTILINE | re.DOTALL)
    assert table, "no KEY_TYPES table in lib/core/types.lua"
    found = dict(re.findall(r"(\w+) = '(\w+)'", table.group(1)))
    # the job-control keys, kept out of the table (see keys_error)
    extra = re.search(
        r"parts\[i\] == '(\w+)' or parts\[i\] == '(\w+)'\) then want = '(\w+)'", types
    )
    assert extra, "lib/core/types.lua no longer names the job-control keys' type"
    found.update({extra.group(1): extra.group(3), extra.group(2): extra.group(3)})
    # the default group's ready list and priority zset (lib/groups/keys.lua), checked by
    # group_error with the types every group's ready keys have
    group_keys = _lib("lib/groups/keys")
    for function, part in re.findall(
        r"local function (ready_\w+)\(g\)\n\s*if g == '' then return K_PREFIX \.\. '(\w+)' end",
        group_keys,
    ):
        want = re.search(rf"type_error\({function}\(g\), '(\w+)'\)", types)
        assert want, f"lib/core/types.lua does not check {function}"
        found[part] = want.group(1)
    return found


def test_the_key_types_agree() -> None:
    lua_types = _key_types_in_lua()
    assert {"pending", "prio"} <= set(lua_types)
    assert lua_types == KEY_TYPES


def test_the_types_documented_in_keys_lua_agree() -> None:
    documented = dict(
        re.findall(
            r"^local K_([A-Z]+) = KEYS\[\d+\] +-- (\w+) ", _lib("lib/core/keys"), re.MULTILINE
        )
    )
    assert {part.lower(): kind for part, kind in documented.items()} == {
        part: KEY_TYPES[part] for part in VECTOR_PARTS
    }


# -- the queue settings' defaults -----------------------------------------------------


def _conf_defaults_in_lua() -> dict[str, int]:
    found = re.findall(
        r"^local DEFAULT_([A-Z_]+) = (\d+)$", _lib("lib/core/conf_defaults"), re.MULTILINE
    )
    return {name.lower(): int(value) for name, value in found}


def test_the_settings_defaults_agree() -> None:
    assert _conf_defaults_in_lua() == CONF_DEFAULTS


def test_conf_lua_reads_every_setting_with_its_named_default() -> None:
    code = _code(_lib("lib/core/conf"))
    fields = re.search(r"'HMGET', K_CONF, ([^)]*)\)", code)
    assert fields
    names = re.findall(r"'(\w+)'", fields.group(1))
    assert names == list(CONF_DEFAULTS)
    for i, name in enumerate(names, 1):
        assert f"{name} = tonumber(raw[{i}]) or DEFAULT_{name.upper()}," in code, name


@pytest.mark.parametrize("name", lua.SCRIPT_NAMES)
def test_no_script_spells_a_settings_default_itself(name: str) -> None:
    """A setting read outside lib/core/conf.lua falls back to the named default."""
    code = _code(lua.load(name).source)
    for setting in CONF_DEFAULTS:
        for read in re.finditer(rf"K_CONF, '{setting}'\)\)\s*(or\s+\S+)?", code):
            assert read.group(1) == f"or DEFAULT_{setting.upper()}", (name, read.group(0))


# -- the lease token ------------------------------------------------------------------

# lib/core/record.lua's rec_token applied to a record the caller passes in ARGV[1]
_TOKEN_PROBE = lua.load("lib/core/record").source + "\nreturn rec_token(rec_decode(ARGV[1]))\n"


def _record(deliveries: int, dequeued_at: int) -> bytes:
    head = struct.pack(
        ">BBbBHHIHHIHIHIB", VERSION, 3, 0, 1, 1, 1, deliveries, 0,
        0, 0, dequeued_at >> 32, dequeued_at & 0xFFFFFFFF, 0, 0, 0,
    )  # fmt: skip
    return head + b"\x00\x00payload"


def test_lua_and_python_format_lease_tokens_alike(server: RedisServer) -> None:
    client = redis.Redis.from_url(server.url)
    try:
        for deliveries, dequeued_at in [(1, 1_700_000_000_123), (2**32 - 1, 2**48 - 1)]:
            raw = _record(deliveries, dequeued_at)
            rec = parse_record(raw)
            assert rec is not None
            from_lua = client.eval(_TOKEN_PROBE, 0, raw).decode()
            assert from_lua == token_of(rec) == f"{deliveries}.{dequeued_at}"
    finally:
        client.close()


@pytest.mark.parametrize("front", ["sync", "async"])
async def test_a_dequeued_job_carries_the_token_the_scripts_check(
    server: RedisServer, queue_name: str, front: str
) -> None:
    queue: Any = (Queue if front == "sync" else AsyncQueue)(queue_name, server.url)
    client = redis.Redis.from_url(server.url)

    async def call(name: str, *args: Any) -> Any:
        result = getattr(queue, name)(*args)
        return await result if front == "async" else result

    try:
        await call("enqueue", "x")
        job = await call("dequeue")
        raw = client.hget(queue.keys.prefix + "jobs", job.id)
        assert isinstance(raw, bytes)
        assert client.eval(_TOKEN_PROBE, 0, raw).decode() == job.token
    finally:
        client.close()
        if front == "async":
            await queue.aclose()
        else:
            queue.close()
