"""The flow-control constants both sides hold agree: the settings' defaults and the
types of the flow keys (lib/limits/conf.lua and durq.protocol.limits)."""

from __future__ import annotations

import re
from importlib import resources

from durq.protocol.limits import FLOW_DEFAULTS, FLOW_KEY_TYPES


def _flow_conf() -> str:
    return resources.files("durq.lua").joinpath("lib/limits/conf.lua").read_text(encoding="utf-8")


def test_the_flow_settings_defaults_agree() -> None:
    found = re.findall(r"^local FLOW_DEFAULT_([A-Z_]+) = (\S+)", _flow_conf(), re.MULTILINE)
    lua = {name.lower(): value for name, value in found}
    python = {name: f"'{v}'" if isinstance(v, str) else str(v) for name, v in FLOW_DEFAULTS.items()}
    assert lua == python


def test_flow_conf_reads_every_setting_with_its_named_default() -> None:
    code = _flow_conf()
    for name in FLOW_DEFAULTS:
        assert f"{name} = " in code and f"or FLOW_DEFAULT_{name.upper()}," in code, name


def test_the_flow_key_types_agree() -> None:
    table = re.search(r"local FLOW_KEY_TYPES = \{(.*?)\}", _flow_conf(), re.DOTALL)
    assert table
    assert dict(re.findall(r"(\w+) = '(\w+)'", table.group(1))) == FLOW_KEY_TYPES
