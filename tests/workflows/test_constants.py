"""The constants the workflow scripts and the Python side share agree."""

from __future__ import annotations

import re
from importlib import resources

from durq.codec import Codec
from durq.keys import OUTBOX_PART
from durq.protocol.workflows import _PART, FIRE_CHUNK, START_CHUNK, STOP_CHUNK


def _lua(name: str) -> str:
    return resources.files("durq.lua").joinpath(name).read_text()


def test_lua_and_python_agree() -> None:
    fan_in = _lua("lib/workflows/fan_in.lua")
    outbox = _lua("lib/core/outbox.lua")
    assert re.search(rf"local START_CHUNK = {START_CHUNK}\b", fan_in)
    assert re.search(rf"local FIRE_CHUNK = {FIRE_CHUNK}\b", fan_in)
    assert re.search(
        rf"local WF_STOP_CHUNK = {STOP_CHUNK}\b", _lua("lib/workflows/fan_in_stop.lua")
    )
    assert re.search(rf"local JSON_CODEC = {int(Codec.JSON)}\b", _lua("lib/workflows/steps.lua"))
    # the parts of long lists: lib/workflows/fan_in.lua reads "name", "name:2"... of _PART items
    assert f"parts of {_PART} items" in fan_in
    assert f"local OUTBOX_PART = '{OUTBOX_PART}'" in outbox
