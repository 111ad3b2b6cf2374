"""The queue as people see it, computed from a real core."""

from datetime import UTC, datetime

from labq.domain.contention import LockNeeds
from labq.domain.locks import parse_locks
from labq.domain.model import AccessPolicy
from labq.domain.priority import Priority
from labq.domain.requirements import parse
from labq.domain.states import Condition
from labq.scheduler.core import Scheduler
from labq.scheduler.entries import RecipeSubmission, SchedulerConfig, SetSubmission, SystemEntry
from labq.service.queueview import rows


def test_rows_follow_rank_and_explain_effective_priority_and_holds():
    policy = AccessPolicy()
    policy.allow("perf", "qe", Priority.URGENT)
    policy.allow("perf", "everybody", Priority.MEDIUM)
    core = Scheduler(SchedulerConfig(aging_bump_after=None), policy)
    for fqdn in ("a", "b"):
        facts = {"fqdn": fqdn, "lab": "lab1", "pool": frozenset({"perf"})}
        core.add_system(SystemEntry(fqdn, "lab1", facts, frozenset({"perf"})), 0)
    any_system = parse({})
    core.submit([SetSubmission(1, 1, (RecipeSubmission(10, any_system),) * 1, submitted=0)], 0)
    core.submit([SetSubmission(2, 2, (RecipeSubmission(20, any_system),), submitted=0)], 0)
    # both systems busy now; a wide urgent set of another group holds nothing yet
    wide = tuple(RecipeSubmission(30 + i, any_system) for i in range(2))
    core.submit([SetSubmission(3, 3, wide, priority=Priority.URGENT, submitted=5)], 5)
    core.submit(
        [SetSubmission(4, 4, (RecipeSubmission(40, any_system),), group="qe", submitted=6)], 6
    )
    now = datetime.fromtimestamp(100, UTC)
    table = rows(core, now)
    assert [r.set_id for r in table] == [3, 4]  # rank: urgent first, then FIFO
    urgent, qe = table
    assert (urgent.nominal, urgent.effective) == ("urgent", "medium")  # capped on pool perf
    assert (qe.nominal, qe.effective) == ("normal", "normal")
    assert urgent.age_s == 95
    assert urgent.hold == "none"
    assert [r.position for r in table] == [1, 2]


def test_rows_show_spv_weight_ticks_and_what_a_set_waits_for():
    core = Scheduler(SchedulerConfig(aging_bump_after=None, running_limit=1, tick=10.0))
    core.add_system(SystemEntry("a", "lab1", {"fqdn": "a", "lab": "lab1"}, frozenset()), 0)
    core.add_system(SystemEntry("b", "lab1", {"fqdn": "b", "lab": "lab1"}, frozenset()), 0)
    any_system = parse({})
    nfs = LockNeeds.of(parse_locks({"storage": {"exclusive": ["nfs1"]}}))
    core.submit([SetSubmission(1, 1, (RecipeSubmission(10, any_system),), locks=nfs)], 0)
    core.submit([SetSubmission(2, 2, (RecipeSubmission(20, any_system),), locks=nfs)], 0)
    core.submit([SetSubmission(3, 3, (RecipeSubmission(30, any_system),), submitted=5)], 5)
    table = rows(core, datetime.fromtimestamp(100, UTC))
    assert [r.set_id for r in table] == [3, 2]  # the uncontended set first, though later
    later, contended = table
    assert (contended.spv, contended.age_ticks, contended.weight) == (4.0, 10, 2.667)  # 4 * 20/30
    assert (later.spv, later.age_ticks) == (1.0, 9)
    # a free slot would not start it: set 1 holds nfs1 (issue 11 item 2)
    assert contended.waits_for == "waits for lock storage:nfs1 held by set 1"
    assert later.waits_for == "a running slot (1 of 1 sets running)"


def test_rows_say_which_systems_a_set_waits_for_when_they_are_away():
    core = Scheduler(SchedulerConfig(aging_bump_after=None), AccessPolicy())
    for fqdn in ("a", "b", "c"):
        facts = {"fqdn": fqdn, "lab": "lab1", "pool": frozenset()}
        core.add_system(SystemEntry(fqdn, "lab1", facts, frozenset()), 0)
    core.change_condition("b", Condition.BROKEN, 0)
    core.change_condition("c", Condition.MANUAL, 0)
    three = tuple(RecipeSubmission(10 + i, parse({})) for i in range(3))
    only_b = (RecipeSubmission(20, parse({"fqdn": "b"})),)
    core.submit([SetSubmission(1, 1, three, submitted=0)], 0)
    core.submit([SetSubmission(2, 2, only_b, submitted=1)], 1)
    shown = {row.set_id: row.waits_for for row in rows(core, datetime.fromtimestamp(2, UTC))}
    assert shown == {
        1: "too few matching systems are usable now; the others are away: b (broken), c (manual)",
        2: "every matching system is broken: b",
    }
    # b is back: set 2 runs on it; set 1 holds nothing while c is away (it could not start)
    core.change_condition("b", Condition.AUTOMATED, 3)
    shown = {row.set_id: row.waits_for for row in rows(core, datetime.fromtimestamp(4, UTC))}
    assert shown == {1: "too few matching systems are usable now; the others are away: c (manual)"}
    assert core.sets[2].started
    assert core.sets[1].lab is None


def test_a_system_a_person_holds_is_named_as_held_not_by_its_condition():
    core = Scheduler(SchedulerConfig(aging_bump_after=None), AccessPolicy())
    for fqdn in ("a", "b"):
        facts = {"fqdn": fqdn, "lab": "lab1", "pool": frozenset()}
        core.add_system(SystemEntry(fqdn, "lab1", facts, frozenset()), 0)
    core.hold_system("b", "bob", 0)
    two = tuple(RecipeSubmission(10 + i, parse({})) for i in range(2))
    core.submit([SetSubmission(1, 1, two, submitted=0)], 0)
    core.submit([SetSubmission(2, 2, (RecipeSubmission(20, parse({"fqdn": "b"})),))], 1)
    shown = {row.set_id: row.waits_for for row in rows(core, datetime.fromtimestamp(2, UTC))}
    assert shown == {
        1: "too few matching systems are usable now; the others are away: b (held by bob)",
        2: "every matching system is held by bob: b",
    }
