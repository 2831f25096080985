"""The status codes of the scripts (lua/lib/core/status.lua) and of Python agree."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from durq.models import Outcome
from durq.protocol.status import OUTCOMES, Status, outcomes, statuses


def _lua_statuses() -> dict[str, int]:
    text = resources.files("durq.lua").joinpath("lib/core/status.lua").read_text()
    found = re.findall(r"^local S_([A-Z_]+) = (-?\d+)\s*$", text, re.MULTILINE)
    assert found, "no status constants found in lib/core/status.lua"
    return {name: int(value) for name, value in found}


def test_lua_and_python_define_the_same_statuses_with_the_same_codes() -> None:
    assert _lua_statuses() == {s.name: s.value for s in Status}


def test_every_status_code_is_distinct() -> None:
    codes = list(_lua_statuses().values())
    assert len(codes) == len(set(codes))


def test_refusals_are_negative_and_outcomes_are_not() -> None:
    refusals = {Status.LEASE_LOST, Status.NOT_FOUND, Status.CORRUPT, Status.NOT_DEAD}
    for status in Status:
        assert (status.value < 0) == (status in refusals), status


def test_statuses_reads_codes_as_status_members() -> None:
    codes = [s.value for s in Status]
    assert statuses(codes) == list(Status)
    assert all(type(s) is Status for s in statuses(codes))
    assert statuses([]) == []


def test_statuses_refuses_an_unknown_code_as_the_enum_does() -> None:
    with pytest.raises(ValueError):
        statuses([0, 99])


def test_every_wire_code_maps_to_one_public_outcome_and_back() -> None:
    # the queues' batch methods return durq.Outcome, never a wire code: a new code in
    # lib/core/status.lua needs its outcome, and no two codes share one
    assert set(OUTCOMES) == set(Status)
    assert len(set(OUTCOMES.values())) == len(Status) == len(Outcome)
    for status, outcome in OUTCOMES.items():
        assert outcome.name == status.name
    assert outcomes(list(Status)) == [OUTCOMES[s] for s in Status]


def test_the_deprecated_durq_status_is_the_outcome_enum_with_a_warning() -> None:
    import durq

    with pytest.warns(DeprecationWarning, match="durq.Outcome"):
        assert durq.Status is Outcome
