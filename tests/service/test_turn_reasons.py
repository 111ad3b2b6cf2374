"""A waiting set that nothing blocks says which systems it waits for, and until when."""

from datetime import UTC, datetime

from labq.domain.model import AccessPolicy
from labq.domain.requirements import parse
from labq.scheduler.core import Scheduler
from labq.scheduler.entries import (
    RecipeSubmission,
    SchedulerConfig,
    SetSubmission,
    SystemEntry,
    ViabilityClass,
)
from labq.scheduler.turn import describe, describe_class
from labq.service.queueview import rows

HOUR = 3600.0
T0 = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC


def _lab(arches: dict[str, str]) -> Scheduler:
    core = Scheduler(SchedulerConfig(aging_bump_after=None), AccessPolicy())
    for fqdn, arch in arches.items():
        facts = {"fqdn": fqdn, "lab": "lab1", "arch": arch}
        core.add_system(SystemEntry(fqdn, "lab1", facts, frozenset()), T0)
    return core


def _submit(core: Scheduler, set_id: int, want: dict[str, str], width: int, **kw: float) -> None:
    recipes = tuple(RecipeSubmission(set_id * 10 + i, parse(want)) for i in range(width))
    core.submit([SetSubmission(set_id, set_id, recipes, submitted=T0, **kw)], T0)


def test_a_set_behind_running_sets_says_how_many_are_busy_and_until_when():
    core = _lab({"a1": "aarch64", "a2": "aarch64", "a3": "aarch64", "x1": "x86_64"})
    _submit(core, 1, {"arch": "aarch64"}, 2, max_time=2 * HOUR)  # runs on two, ends 00:13
    core.started(1, T0)
    _submit(core, 2, {"arch": "aarch64"}, 3)
    (row,) = rows(core, datetime.fromtimestamp(T0 + 60, UTC))
    assert row.waits_for is None  # nothing blocks it: only systems
    # it holds the free one (a3) and waits for the two that set 1 runs on until 00:13
    assert row.hold == "holding 1 of 3 in lab1"
    assert row.reason == "waits for 2 systems matching arch=aarch64: 2 busy until ~00:13 UTC"
    assert "its turn" not in row.reason


def test_busy_systems_without_max_time_and_holders_ahead_are_named():
    core = _lab({"a1": "aarch64", "a2": "aarch64"})
    _submit(core, 1, {"arch": "aarch64"}, 1)  # no max_time: could end any moment
    core.started(1, T0)
    _submit(core, 2, {"arch": "aarch64"}, 2)  # holds a2, waits for a1
    _submit(core, 3, {"arch": "aarch64"}, 1)
    shown = {r.set_id: r.reason for r in rows(core, datetime.fromtimestamp(T0 + 60, UTC))}
    assert shown[2] == "waits for 1 system matching arch=aarch64: 1 busy (no end declared)"
    assert shown[3] == (
        "waits for 1 system matching arch=aarch64 (2 in all):"
        " 1 busy (no end declared), 1 held by set 2"
    )


def test_the_reason_of_a_blocked_set_is_what_blocks_it():
    core = _lab({"a1": "aarch64"})
    _submit(core, 1, {"arch": "aarch64"}, 1)
    core.started(1, T0)
    recipes = (RecipeSubmission(20, parse({"arch": "aarch64"})),)
    blocked = SetSubmission(2, 2, recipes, submitted=T0, blocked="waits for job 1 to pass")
    core.submit([blocked], T0)
    (row,) = rows(core, datetime.fromtimestamp(T0, UTC))
    assert row.reason == row.waits_for == "waits for job 1 to pass"
    assert row.state == "queued"


def test_requirements_read_as_people_write_them():
    req = parse({"and": [{"arch": "aarch64"}, {"memory": {">=": 4096}}, {"not": {"hv": "kvm"}}]})
    assert describe(req) == "arch=aarch64 and memory>=4096 and not (hv=kvm)"
    assert describe(parse({"or": [{"arch": "s390x"}, {"arch": "ppc64le"}]})) == (
        "(arch=s390x or arch=ppc64le)"
    )
    assert (
        describe_class(ViabilityClass(parse({}), frozenset({"b", "a"}))) == "any system except a, b"
    )
    assert describe_class(ViabilityClass(parse({}), force="s1")) == "system s1"
    assert describe_class(ViabilityClass(parse({}))) == ""
