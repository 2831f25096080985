"""The scripts as one Redis Functions library (durq.lua.functions), and the driver's use
of it: FCALL where the server has Functions, EVALSHA on Redis 6.2 or when forced."""

from __future__ import annotations

import collections
import re
import shutil
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from durq import AsyncQueue, Queue, lua
from durq.dev.server import RedisServer
from durq.keys import QueueKeys
from durq.lua import SCRIPT_NAMES
from durq.lua.functions import build, library, per_call_block
from helpers import script_calls

_BLOCKS = re.compile(r"^--- @(?:per-call|eval-only).*?^--- @end[^\n]*$", re.MULTILINE | re.DOTALL)
_LOCAL = re.compile(r"^local (?!function\b)([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)", re.MULTILINE)
_INCLUDE = re.compile(r'^([ \t]*)--- @include "([A-Za-z0-9_/]+)"', re.MULTILINE)


def _libs() -> list[str]:
    return lua.lib_names()


def _inside_functions_only() -> set[str]:
    """Libs that every file includes indented, inside a function (made per call of it)."""
    top: set[str] = set()
    nested: set[str] = set()
    for name in [*SCRIPT_NAMES, *_libs()]:
        for indent, lib in _INCLUDE.findall(lua._read(name)):
            (nested if indent else top).add(lib)
    return nested - top


def test_a_lib_keeps_no_state_between_calls_outside_a_per_call_block() -> None:
    """A library runs a lib's top level once, at FUNCTION LOAD: a top-level local that
    any call changes would carry one call's value into the next. Such state must sit in
    a ``--- @per-call`` block (reset at the start of every call); the other top-level
    locals are functions or UPPER_CASE constants that nothing assigns or fills."""
    code = "\n".join(lua._read(n) for n in [*SCRIPT_NAMES, *_libs()])
    problems: list[str] = []
    exempt = _inside_functions_only()
    for lib in _libs():
        if lib in exempt:
            continue
        text = _BLOCKS.sub("", lua._read(lib))
        for match in _LOCAL.finditer(text):
            for name in (n.strip() for n in match.group(1).split(",")):
                if not re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
                    problems.append(f"{lib}: local {name} outside a --- @per-call block")
                    continue
                changed = re.compile(
                    rf"(?<![\w.])(?<!local ){name}\s*(?:\[[^\]\n]*\]|\.\w+)?\s*=(?!=)"
                    rf"|table\.(?:insert|remove|sort)\(\s*{name}\b"
                )
                if changed.search(code):
                    problems.append(f"{lib}: the constant {name} is changed somewhere")
        for line in text.splitlines():
            if line and not line[0].isspace() and not line.startswith(("local ", "--", "end", "}")):
                problems.append(f"{lib}: top-level statement {line!r} (runs once, at load)")
    assert problems == []


def test_a_per_call_block_becomes_declarations_and_assignments() -> None:
    names, body = per_call_block("local a = KEYS[1] -- the first\nlocal b, c\nlocal d = {\n}\n")
    assert names == ["a", "b", "c", "d"]
    assert body == "a = KEYS[1] -- the first\nb, c = nil, nil\nd = {\n}\n"


def test_the_library_name_and_function_names_carry_its_hash() -> None:
    lib = library()
    assert re.fullmatch(r"durq_[0-9a-f]{12}", lib.name)
    assert lib.source.startswith(f"#!lua name={lib.name}\n")
    assert lib.functions == {op: f"{lib.name}_{op}" for op in SCRIPT_NAMES}


def _redis7(make_server: Callable[..., RedisServer]) -> RedisServer:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("no Debian redis-server (7.0) on PATH")
    server = make_server(binary=binary)
    if server.version < (7,):
        pytest.skip(f"redis-server on PATH is {server.version}, without Functions")
    return server


@pytest.fixture(params=["valkey", "redis7"])
def functions_server(
    request: pytest.FixtureRequest, make_server: Callable[..., RedisServer]
) -> RedisServer:
    """A private server with Functions: Valkey 9, or Debian's Redis 7.0."""
    if request.param == "redis7":
        return _redis7(make_server)
    return make_server("valkey")


def test_the_library_loads_and_registers_every_operation(functions_server: RedisServer) -> None:
    lib = library()
    client = redis.Redis.from_url(functions_server.url)
    try:
        assert client.function_load(lib.source) == lib.name.encode()
        with pytest.raises(redis.ResponseError, match="already exists"):
            client.function_load(lib.source)  # the driver takes this as loaded
        (listed,) = client.function_list(library=lib.name)
        got = {f[b"name"].decode() for f in _pairs(listed)[b"functions"]}
        assert got == set(lib.functions.values())
    finally:
        client.close()


def _pairs(reply: Any) -> dict[bytes, Any]:
    """A RESP2 map reply (a flat list, or a list of maps for each function) as a dict."""
    if isinstance(reply, dict):
        return reply
    out = dict(zip(reply[::2], reply[1::2], strict=True))
    if b"functions" in out:
        out[b"functions"] = [_pairs(f) for f in out[b"functions"]]
    return out


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """Lua files served from a dict, for a library of test operations."""
    fake: dict[str, str] = {}
    real = lua._read
    monkeypatch.setattr(lua, "_read", lambda name: fake[name] if name in fake else real(name))
    yield fake


def test_per_call_state_starts_fresh_in_every_call(
    functions_server: RedisServer, probe: dict[str, str]
) -> None:
    probe["lib/state"] = (
        "--- @per-call\nlocal hits = {}\nlocal first = KEYS[1]\n--- @end\n"
        "local KEPT = {} -- made once at load: shows that only the block is reset\n"
        "local function hit() hits[#hits + 1] = 1; KEPT[#KEPT + 1] = 1; return #hits end\n"
    )
    # the operation's own leading locals go to block level too: `seen` is per call
    probe["probe"] = (
        '--- @include "lib/state"\nlocal LIMIT = 3\nlocal seen = {}\nlocal arg = ARGV[1]\n'
        "local function see() seen[#seen + 1] = arg; return #seen end\n"
        "local out = {hit(), #KEPT, first, see(), arg, LIMIT}\n"
        "return out\n"
    )
    lib = build(["probe"])
    assert "local function durq_run()\nreturn out" in lib.source
    client = redis.Redis.from_url(functions_server.url)
    try:
        client.function_load(lib.source)
        fn = lib.functions["probe"]
        assert client.fcall(fn, 1, "{q}a", "x") == [1, 1, b"{q}a", 1, b"x", 3]
        assert client.fcall(fn, 1, "{q}b", "y") == [1, 2, b"{q}b", 1, b"y", 3]
    finally:
        client.close()


def test_the_operations_share_one_copy_of_each_lib_per_group() -> None:
    """The server keeps every lib function of the library for good and its collector
    walks them all in each cycle (issue 19): a few groups of operations, each with one
    copy of the libs its members include, rather than a copy for each operation."""
    source = library().source
    groups = source.count("local durq_lib_resets = {}")
    assert 1 <= groups <= 3
    made = collections.Counter(re.findall(r"(?m)^local function (\w+)", source))
    del made["durq_run"]  # each operation's own text, once each
    # an include inside a function (lib/limits/gate.lua's of lib/limits/gate_hooks) is one copy more
    assert max(made.values()) <= groups + 1
    assert sum(made.values()) <= 2 * len(made)  # was about 6.7 (990 for 148 names)


def test_operations_of_one_group_each_start_from_their_own_keys(
    functions_server: RedisServer, probe: dict[str, str]
) -> None:
    """Two operations share a lib and its per-call state but not their KEYS layout:
    each call resets exactly its own libs' blocks, whatever ran before it."""
    probe["lib/count"] = (
        "--- @per-call\nlocal K_A = KEYS[1]\nlocal n = 0\n--- @end\n"
        "local function bump() n = n + 1; return n end\n"
    )
    probe["lib/second"] = '--- @include "lib/count"\n--- @per-call\nlocal K_B = KEYS[2]\n--- @end\n'
    probe["probe_a"] = '--- @include "lib/count"\nreturn {K_A, bump(), bump()}\n'
    probe["probe_b"] = '--- @include "lib/second"\nreturn {K_A, K_B, bump()}\n'
    lib = build(["probe_a", "probe_b"])
    assert lib.source.count("local durq_lib_resets = {}") == 1
    assert lib.source.count("local function bump()") == 1
    client = redis.Redis.from_url(functions_server.url)
    try:
        client.function_load(lib.source)
        a, b = lib.functions["probe_a"], lib.functions["probe_b"]
        assert client.fcall(a, 1, "{q}a") == [b"{q}a", 1, 2]
        assert client.fcall(b, 2, "{q}b", "{q}c") == [b"{q}b", b"{q}c", 1]
        assert client.fcall(a, 1, "{q}d") == [b"{q}d", 1, 2]
        # no KEYS[2] this time: K_B is nil again (a reply stops at its first nil)
        assert client.fcall(b, 1, "{q}e") == [b"{q}e"]
    finally:
        client.close()


@pytest.mark.parametrize("forced", [False, True], ids=["default", "evalsha-forced"])
@pytest.mark.parametrize("front", ["sync", "async"])
async def test_scripts_run_with_fcall_where_the_server_has_functions(
    server: RedisServer, queue_name: str, front: str, forced: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis 6.2 keeps EVALSHA (told by the first FCALL's reply); DURQ_EVALSHA forces it."""
    if forced:
        monkeypatch.setenv("DURQ_EVALSHA", "1")
    queue: Any = (Queue if front == "sync" else AsyncQueue)(queue_name, server.url)

    async def call(name: str, *args: Any) -> Any:
        result = getattr(queue, name)(*args)
        return await result if front == "async" else result

    try:
        before = script_calls(server)
        await call("enqueue", "x")
        await call("release", await call("dequeue"))
        assert (await call("stats")).completed == 1
        after = script_calls(server)
    finally:
        await call("aclose" if front == "async" else "close")
    fcalls, evalshas = after["fcall"] - before["fcall"], after["evalsha"] - before["evalsha"]
    if server.version >= (7,) and not forced:
        # one more where this server did not have the library yet (Function not found)
        assert fcalls in (4, 5)
        assert evalshas == 0
    else:
        assert evalshas == 4
        # Redis 6.2 counts no FCALL (unknown); the first one told the driver
        assert fcalls == 0


async def test_a_setting_changed_between_two_calls_is_read_again(
    server: RedisServer, queue_name: str
) -> None:
    """release.lua reads the dedup window through lib/core/conf.lua's per-call cache: a cache
    left from the previous call would keep the old window for the new tombstone."""
    queue = AsyncQueue(queue_name, server.url)
    client = redis.Redis.from_url(server.url)
    done = QueueKeys(queue_name).prefix + "done"
    try:
        ends = []
        for window in (60.0, 1.0):
            await queue.configure(dedup_window=window)
            await queue.enqueue("x")
            job = await queue.dequeue()
            assert job is not None
            await queue.release(job)
            ends.append(float(client.zscore(done, job.id) or 0) / 1000 - time.time())
        assert 50 < ends[0] <= 60.5
        assert 0 < ends[1] <= 1.5
    finally:
        await queue.aclose()
        client.close()


def _app_user(server: RedisServer, *commands: str) -> str:
    """A user of every command but ``commands`` (e.g. ``-function``); its URL."""
    admin = redis.Redis.from_url(server.url)
    try:
        admin.acl_setuser(
            "app",
            enabled=True,
            passwords=["+pw"],
            keys=["*"],
            channels=["*"],
            commands=["+@all", *commands],
        )
    finally:
        admin.close()
    return f"redis://app:pw@{server.host}:{server.port}"


def _enqueue_and_release_twice(queue_name: str, url: str) -> None:
    with Queue(queue_name, url) as queue:
        for payload in ("a", "b"):
            queue.enqueue(payload)
            job = queue.dequeue()
            assert job is not None and job.payload == payload
            queue.release(job)


def test_a_user_not_allowed_function_list_runs_the_scripts_with_evalsha(
    make_server: Callable[..., RedisServer], queue_name: str
) -> None:
    """The library cannot be checked before a first FCALL: the node is an EVALSHA node,
    and no FCALL is ever sent."""
    server = make_server("valkey")
    _enqueue_and_release_twice(queue_name, _app_user(server, "-function"))
    assert script_calls(server) == {"fcall": 0, "evalsha": 6}


@pytest.mark.parametrize("loaded", [False, True], ids=["missing", "loaded-by-an-admin"])
def test_a_user_not_allowed_function_load_uses_the_library_only_once_an_admin_loaded_it(
    make_server: Callable[..., RedisServer], queue_name: str, loaded: bool
) -> None:
    """FUNCTION LIST shows the library missing and FUNCTION LOAD is refused: EVALSHA.
    Loaded by an admin, it is checked and called."""
    server = make_server("valkey")
    if loaded:
        admin = redis.Redis.from_url(server.url)
        admin.function_load(library().source)
        admin.close()
    _enqueue_and_release_twice(queue_name, _app_user(server, "-function|load"))
    expected = {"fcall": 6, "evalsha": 0} if loaded else {"fcall": 0, "evalsha": 6}
    assert script_calls(server) == expected


def test_out_of_memory_a_read_still_works_and_a_write_is_refused_as_before(
    make_server: Callable[..., RedisServer], queue_name: str
) -> None:
    """A function is refused before it runs when the server is out of memory; a script
    without flags runs until its first write that could grow memory. The driver resends
    such an FCALL with EVALSHA, so a read (stats) works as it did before Functions."""
    server = make_server("valkey")
    admin = redis.Redis.from_url(server.url)
    try:
        with Queue(queue_name, server.url) as queue:
            queue.enqueue("a")
            used = int(admin.info("memory")["used_memory"])
            admin.config_set("maxmemory", used - 100_000)
            assert queue.stats().pending == 1
            with pytest.raises(redis.exceptions.OutOfMemoryError):
                queue.enqueue("b")
            admin.config_set("maxmemory", 0)
            assert queue.stats().pending == 1
    finally:
        admin.close()


def test_a_full_server_that_lost_the_library_runs_reads_with_evalsha_until_it_can_load_it(
    make_server: Callable[..., RedisServer], queue_name: str
) -> None:
    """FUNCTION LOAD is refused for want of memory: the driver runs the scripts with
    EVALSHA meanwhile, and does not send the library's text again with every call."""
    server = make_server("valkey")
    admin = redis.Redis.from_url(server.url)
    try:
        with Queue(queue_name, server.url) as queue:
            queue.enqueue("a")
            admin.function_flush()
            used = int(admin.info("memory")["used_memory"])
            admin.config_set("maxmemory", used // 2)
            loads_before = _function_loads(admin)
            for _ in range(20):
                assert queue.stats().pending == 1
            assert _function_loads(admin) - loads_before <= 1
            admin.config_set("maxmemory", 0)
            time.sleep(1.1)  # the load is tried again a second after the refusal
            before = script_calls(server)["fcall"]
            assert queue.stats().pending == 1
            assert script_calls(server)["fcall"] == before + 1
    finally:
        admin.config_set("maxmemory", 0)
        admin.close()


def _function_loads(admin: redis.Redis) -> int:
    """FUNCTION LOADs sent, run or refused."""
    entry = admin.info("commandstats").get("cmdstat_function|load", {})
    return int(entry.get("calls", 0)) + int(entry.get("rejected_calls", 0))


def test_only_release_steps_the_collector() -> None:
    """Release, off every caller's path, keeps the Lua collector's pace; the enqueue and
    the fetch, which a caller waits for, do not pay for an increment."""
    from durq.lua.functions import COLLECTOR_STEP, library

    lib = library()
    blocks = lib.source.split("redis.register_function{function_name = ")[1:]
    stepping = {
        op
        for op, function in lib.functions.items()
        for block in blocks
        if block.startswith(f"'{function}'") and "collectgarbage('step', 0)" in block
    }
    assert stepping == set(COLLECTOR_STEP) == {"release"}


_STEPMUL_PROBE = """#!lua name=durq_test_stepmul
redis.register_function('durq_test_stepmul', function(keys, args)
  return collectgarbage('setstepmul', tonumber(args[1]))
end)"""


def test_every_call_sets_the_collector_step_multiplier(functions_server: RedisServer) -> None:
    """Any durq call leaves the Functions VM's collector at COLLECTOR_STEPMUL, so the
    server's periodic step (every 50th script call) does a quarter of Lua's default work
    in the call it lands on; a library's load cannot set it, so every call does."""
    from durq.lua.functions import COLLECTOR_STEPMUL

    admin = redis.Redis.from_url(functions_server.url)
    queue = Queue("stepmul", functions_server.url)
    try:
        admin.function_load(_STEPMUL_PROBE)
        assert admin.fcall("durq_test_stepmul", 0, 200) == 200  # Lua's default
        queue.enqueue("a")
        assert admin.fcall("durq_test_stepmul", 0, 200) == COLLECTOR_STEPMUL == 50
        # the library gone and the VM at the default again (Valkey makes a new VM on
        # FUNCTION FLUSH; Redis 7.0 keeps its VM): the next call loads and sets it
        admin.function_flush()
        admin.function_load(_STEPMUL_PROBE)
        admin.fcall("durq_test_stepmul", 0, 200)
        assert queue.stats().pending == 1
        assert admin.fcall("durq_test_stepmul", 0, 200) == COLLECTOR_STEPMUL
    finally:
        queue.close()
        admin.close()
