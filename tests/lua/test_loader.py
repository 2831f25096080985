"""The script loader: includes, and recovery from a flushed script cache (contract
headers: test_contracts.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from importlib import resources
from typing import Any

import pytest
import redis

from durq import AsyncQueue, Queue, lua
from durq.dev.server import RedisServer
from durq.lua import SCRIPT_NAMES, ScriptLoadError


@pytest.fixture
def files(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """Replace the package's Lua files with a dict name -> text for the test."""
    fake: dict[str, str] = {}

    def read(name: str) -> str:
        if name not in fake:
            raise ScriptLoadError(f"no Lua file {name}.lua in durq.lua")
        return fake[name]

    monkeypatch.setattr(lua, "_read", read)
    lua.load.cache_clear()
    yield fake
    lua.load.cache_clear()


def test_an_include_shared_by_several_files_is_inlined_once_before_its_users(
    files: dict[str, str],
) -> None:
    files.update(
        {
            "main": '--[[ main: x ]]\n--- @include "lib/a"\n--- @include "lib/b"\n<MAIN>\n',
            "lib/a": '--- @include "lib/base"\n<A>\n',
            "lib/b": '--- @include "lib/base"\n--- @include "lib/a"\n<B>\n',
            "lib/base": "<BASE>\n",
        }
    )
    source = lua.load("main").source
    assert [source.count(f"<{part}>") for part in ("BASE", "A", "B", "MAIN")] == [1, 1, 1, 1]
    order = [source.index(f"<{part}>") for part in ("BASE", "A", "B", "MAIN")]
    assert order == sorted(order)
    assert "@include" not in source


def test_an_include_cycle_is_an_error_that_names_the_stack(files: dict[str, str]) -> None:
    files.update(
        {
            "main": '--- @include "lib/a"\n',
            "lib/a": '--- @include "lib/b"\n',
            "lib/b": '--- @include "lib/a"\n',
        }
    )
    with pytest.raises(ScriptLoadError, match=r"include cycle: main -> lib/a -> lib/b -> lib/a"):
        lua.load("main")


def test_a_script_including_itself_is_a_cycle(files: dict[str, str]) -> None:
    files["main"] = '--- @include "main"\n'
    with pytest.raises(ScriptLoadError, match="main -> main"):
        lua.load("main")


def test_a_missing_include_is_an_error_that_names_the_stack(files: dict[str, str]) -> None:
    files.update({"main": '--- @include "lib/a"\n', "lib/a": '--- @include "lib/gone"\n'})
    with pytest.raises(ScriptLoadError) as caught:
        lua.load("main")
    message = str(caught.value)
    assert "lib/gone.lua" in message
    assert "included from main -> lib/a" in message


def test_a_missing_script_is_an_error(files: dict[str, str]) -> None:
    with pytest.raises(ScriptLoadError, match=r"nope\.lua"):
        lua.load("nope")


def test_only_exact_include_lines_are_includes(files: dict[str, str]) -> None:
    files.update(
        {
            "main": '-- @include "lib/a"\n--- @include lib/a\nx = 1 --- @include "lib/a"\n',
            "lib/a": "SHOULD NOT APPEAR",
        }
    )
    assert "SHOULD NOT APPEAR" not in lua.load("main").source


def test_the_real_include_helper_reads_package_files() -> None:
    with pytest.raises(ScriptLoadError, match="no Lua file"):
        lua._read("lib/definitely-missing")
    assert "S_OK" in lua._read("lib/core/status")


def test_every_lua_file_of_the_package_is_a_known_script() -> None:
    root = resources.files("durq.lua")
    assert not [p.name for p in root.iterdir() if p.name.endswith(".lua")], "a script outside ops/"
    on_disk = {p.name[:-4] for p in root.joinpath("ops").iterdir() if p.name.endswith(".lua")}
    assert on_disk == set(SCRIPT_NAMES)
    assert len(SCRIPT_NAMES) == len(on_disk), "a script named twice"
    assert not [p.name for p in root.joinpath("lib").iterdir() if p.name.endswith(".lua")], (
        "a helper outside an area of lib/"
    )


def test_every_library_file_is_used_by_some_script() -> None:
    include = re.compile(r'^[ \t]*--- @include "([A-Za-z0-9_/]+)"\s*$', re.MULTILINE)
    used: set[str] = set()
    todo = list(SCRIPT_NAMES)
    while todo:
        for name in include.findall(lua._read(todo.pop())):
            if name not in used:
                used.add(name)
                todo.append(name)
    libs = set(lua.lib_names())
    assert libs - used == set(), "library files no script includes"


def test_every_script_compiles_on_every_server(server: RedisServer) -> None:
    client = redis.Redis.from_url(server.url)
    try:
        for script in lua.load_all().values():
            assert client.script_load(script.source) == script.sha
    finally:
        client.close()


@pytest.mark.parametrize("path", ["evalsha", "fcall"])
@pytest.mark.parametrize("front", ["sync", "async"])
async def test_a_flushed_script_cache_is_reloaded_on_noscript(
    server: RedisServer, queue_name: str, front: str, path: str
) -> None:
    """Both ways of running scripts: EVALSHA after SCRIPT FLUSH, FCALL after FUNCTION
    FLUSH (the library is loaded again where a call finds it missing)."""
    from durq.protocol.calls import MAX_BATCH

    if path == "fcall" and server.version < (7,):
        pytest.skip("no Functions before Redis 7")
    queue: Any = (Queue if front == "sync" else AsyncQueue)(queue_name, server.url)
    queue._driver.functions = path == "fcall"

    def _flush(server: RedisServer) -> None:
        client = redis.Redis.from_url(server.url)
        try:
            if path == "fcall":
                client.function_flush()
            else:
                client.script_flush()
        finally:
            client.close()

    async def call(name: str, *args: Any, **kwargs: Any) -> Any:
        result = getattr(queue, name)(*args, **kwargs)
        return await result if front == "async" else result

    try:
        await call("enqueue", "before")  # enqueue's script is now known to be loaded
        _flush(server)
        await call("enqueue", "single call")
        _flush(server)
        # more than one script call: they go in one pipeline, which must reload too
        results = await call("enqueue_many", range(MAX_BATCH * 2 + 1))
        assert len(results) == MAX_BATCH * 2 + 1
        assert (await call("stats")).pending == MAX_BATCH * 2 + 3
        _flush(server)
        jobs = await call("dequeue_many", 3)
        assert [j.payload for j in jobs] == ["before", "single call", 0]
        _flush(server)
        await call("release_many", jobs)
        assert (await call("stats")).completed == 3
    finally:
        if front == "async":
            await queue.aclose()
        else:
            queue.close()
