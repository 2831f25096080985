"""The counters the scripts keep and the constants of job control agree with Python.

A counter a script writes into the stats hash that Python does not declare would never
be shown; one Python declares that no script writes would read 0 forever.
"""

from __future__ import annotations

import dataclasses
import re

from durq import lua
from durq.models import QueueStats
from durq.protocol import admin, control, record, workflows


def _source(name: str) -> str:
    return lua._read(name)


def _all_lua() -> str:
    return "\n".join(lua._read(name) for name in [*lua.SCRIPT_NAMES, *lua.lib_names()])


def _counters_written() -> set[str]:
    code = _all_lua()
    found = set(re.findall(r"\bcount\('(\w+)'", code))
    found |= set(re.findall(r"'HINCRBY', K_STATS, '(\w+)'", code))
    # count(why, 1) in lib/control/job_control.lua: why is 'cancelled' or 'expired'
    # 'wf_' .. state in lib/workflows/fan_in.lua (wf_close): state is 'completed', 'failed' or
    # 'cancelled' (its callers: wf_end, and wf_end_early for wf_fail and wf_abort)
    if re.search(r"'wf_' \.\. state", code):
        found |= {"wf_completed", "wf_failed"}
        if re.search(r"wf_(close|end_early)\(w, 'cancelled'", code):
            found.add("wf_cancelled")
    if re.search(r"\bcount\(why, ", code):
        found |= {"cancelled", "expired"}
    return found


def test_every_counter_a_script_writes_is_declared_in_python() -> None:
    written = _counters_written()
    assert {"cancelled", "expired", "completed"} <= written
    declared = {
        *admin._COUNTERS,  # QueueStats: durq stats, the dashboard, /metrics
        *(f"wf_{name}" for name in workflows.COUNTERS),  # durq_workflows_*_total
        "rate_limited",  # durq.limits.FlowInfo (limits_info.lua reads it)
    }
    assert written - {"ready", "held"} == declared  # the gauges


def test_every_declared_counter_is_a_field_of_queue_stats() -> None:
    fields = {f.name for f in dataclasses.fields(QueueStats)}
    assert set(admin._COUNTERS) <= fields


def test_the_stats_script_documents_every_counter() -> None:
    header = " ".join(lua.load("stats").header.split())
    for name in admin._COUNTERS:
        assert re.search(rf"\b{name}\b", header), name


def test_job_control_constants_agree() -> None:
    layout = _source("lib/core/record_layout")
    flags = dict(re.findall(r"^local (FLAG_[A-Z]+) = (\d+)", layout, re.MULTILINE))
    assert int(flags["FLAG_CANCEL"]) == control.FLAG_CANCEL
    assert int(flags["FLAG_CONTROL"]) == control.FLAG_CONTROL
    assert int(flags["FLAG_HELD"]) == record.FLAG_HELD
    assert len(set(flags.values())) == len(flags), "two flags share a bit"
    parked = re.search(r"^local PARKED = (\d+)", _source("lib/control/job_control"), re.MULTILINE)
    assert parked and int(parked.group(1)) == control.PARKED
