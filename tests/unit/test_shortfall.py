"""Why no system matches a requirement: the term at fault, in words (issue 22)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labq.domain.model import System
from labq.domain.requirements import matches, parse
from labq.domain.shortfall import explain, recorded, render, unknown

FLEET = [
    System("s1.lab1", "lab1", attributes={"memory_mb": 16384, "cpus": 8}),
    System("s2.lab1", "lab1", arch="aarch64", attributes={"memory_mb": 4096}),
    System("t1.lab2", "lab2", attributes={"memory_mb": 8192, "machine_type": "smithi"}),
]
FACTS = [s.facts() for s in FLEET]

CASES: dict[str, tuple[dict[str, Any], str | None, str]] = {
    "a misspelt property": (
        {"arch": "x86_64", "memroy_mb": {">=": 4096}},
        "memroy_mb",
        "memroy_mb: no system records this property; did you mean memory_mb?"
        " (systems record cpus, machine_type, memory_mb besides the built-in ones)",
    ),
    "a property nobody records and nothing near": (
        {"colour": "red"},
        "colour",
        "colour: no system records this property"
        " (systems record cpus, machine_type, memory_mb besides the built-in ones)",
    ),
    "an unknown system": ({"fqdn": "s9.lab1"}, "fqdn", "fqdn = s9.lab1: no such system"),
    "more than the largest": (
        {"memory_mb": {">=": 999999}},
        "memory_mb",
        "memory_mb >= 999999: no system has it (largest 16384)",
    ),
    "less than the smallest": (
        {"memory_mb": {"<": 1024}},
        "memory_mb",
        "memory_mb < 1024: no system has it (smallest 4096)",
    ),
    "a value nobody has": (
        {"arch": "s390x"},
        "arch",
        "arch = s390x: no system has it (they have aarch64, x86_64)",
    ),
    "apart but never together": (
        {"lab": "lab2", "arch": "aarch64"},
        "arch",
        "lab = lab2 holds on 1 of 3 systems; of those, arch = aarch64: none of them has it"
        " (they have x86_64)",
    ),
    "a whole alternative": (
        {"or": [{"arch": "s390x"}, {"lab": "lab9"}]},
        "arch",
        "arch = s390x or lab = lab9: no system matches it",
    ),
    "an unknown property beats a known failing one": (
        {"arch": "s390x", "cpuz": 4},
        "cpuz",
        "cpuz: no system records this property; did you mean cpus?"
        " (systems record cpus, machine_type, memory_mb besides the built-in ones)",
    ),
}


@pytest.mark.parametrize(("host", "prop", "problem"), CASES.values(), ids=CASES.keys())
def test_the_term_at_fault_is_named_with_what_systems_have(
    host: dict[str, Any], prop: str | None, problem: str
) -> None:
    req = parse(host)
    assert not any(matches(req, f) for f in FACTS)
    found = explain(req, FACTS)
    assert (found.prop, found.problem) == (prop, problem)


def test_unknown_lists_properties_no_system_records_in_written_order() -> None:
    req = parse({"zeta": 1, "arch": "x86_64", "not": {"alpha": 2}, "device": {"driver": "x"}})
    assert unknown(req, recorded(FACTS)) == ["zeta", "alpha"]  # device is built in


def test_a_term_that_asks_for_no_value_is_no_unknown_property() -> None:
    # Beaker's bare metal (<hypervisor op="=" value=""/>) and "!=" hold on systems without it
    req = parse({"hypervisor": "", "lender": {"!=": "acme"}, "colour": {"like": "r%"}})
    assert unknown(req, recorded(FACTS)) == ["colour"]


def test_rendering_reads_like_the_requirement() -> None:
    req = parse({"memory_mb": {">=": 4096}, "or": [{"arch": "x86_64"}, {"arch": "aarch64"}]})
    assert render(req) == "memory_mb >= 4096 and (arch = x86_64 or arch = aarch64)"


@given(
    st.dictionaries(
        st.sampled_from(["arch", "lab", "memory_mb", "cpus", "machine_type", "colour"]),
        st.sampled_from(["x86_64", "lab2", 4096, 16384, 8, "smithi", "s390x"]),
        min_size=1,
    )
)
def test_any_requirement_that_matches_nothing_gets_a_named_reason(host: dict[str, Any]) -> None:
    req = parse(host)
    if any(matches(req, f) for f in FACTS):
        return
    found = explain(req, FACTS)
    assert found.prop in host
    assert found.problem.startswith(tuple(f"{k}" for k in host))
