"""The bridge: the core's decisions committed to the database, and the core rebuilt from it.

A restarted service must take the decisions the one that stopped would have
taken. So every scenario here runs the live scheduler against the database,
rebuilds a second scheduler from the database alone, and compares them: their
state (holders, free systems, placements) and the decisions they take next.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labq.domain.job import JobSpec
from labq.domain.model import System
from labq.domain.priority import Priority
from labq.domain.states import Condition, RecipeState, Usage
from labq.scheduler import decisions as d
from labq.scheduler.core import Scheduler
from labq.scheduler.entries import SchedulerConfig
from labq.service import bridge
from labq.service.actions import Launch
from labq.store import Repository, epoch
from labq.store.supervisors import Beat

from .conftest import ADMIN, Database, at

CONFIG = SchedulerConfig(aging_bump_after=None, holds_per_lab=1)
SYSTEMS = (  # fqdn, lab, arch, memory, pools, condition
    ("a1", "lab1", "x86_64", 8192, (), Condition.AUTOMATED),
    ("a2", "lab1", "x86_64", 16384, ("big",), Condition.AUTOMATED),
    ("a3", "lab1", "x86_64", 16384, ("big",), Condition.AUTOMATED),
    ("a4", "lab1", "aarch64", 8192, (), Condition.AUTOMATED),
    ("b1", "lab2", "x86_64", 8192, (), Condition.AUTOMATED),
    ("b2", "lab2", "x86_64", 16384, ("big",), Condition.AUTOMATED),
    ("b3", "lab2", "x86_64", 16384, (), Condition.AUTOMATED),
    ("m1", "lab2", "x86_64", 65536, (), Condition.MANUAL),
)
X86: dict[str, Any] = {"arch": "x86_64"}
BIG: dict[str, Any] = {"memory_mb": {">=": 16000}}
ANY: dict[str, Any] = {}
STARTED = (RecipeState.WAITING, RecipeState.INSTALLING, RecipeState.RUNNING)


def build_lab(repo: Repository) -> Scheduler:
    """Two labs, a restricted pool, two users; the live scheduler told of every system."""
    now = at(0)
    for lab in ("lab1", "lab2"):
        repo.systems.add_lab(lab, actor=ADMIN, now=now)
    repo.access.add_pool("big", actor=ADMIN, now=now)
    repo.people.add_group("kernel-qe", actor=ADMIN, now=now)
    for user in ("alice", "bob"):
        repo.people.add_user(user, actor=ADMIN, now=now)
    repo.people.add_member("alice", "kernel-qe", actor=ADMIN, now=now)
    repo.access.allow("big", "kernel-qe", Priority.HIGH, actor=ADMIN, now=now)
    repo.access.allow("big", "everybody", Priority.LOW, actor=ADMIN, now=now)
    scheduler = Scheduler(CONFIG, repo.access.load_access_policy())
    for fqdn, lab, arch, memory, pools, condition in SYSTEMS:
        system = System(
            fqdn,
            lab,
            arch=arch,
            attributes={"memory_mb": memory},
            pools=frozenset(pools),
            condition=condition,
        )
        repo.systems.add_system(system, actor=ADMIN, now=now)
        decisions = scheduler.add_system(bridge.system_entry(system), epoch(now))
        assert bridge.settle(repo, scheduler, decisions, now=now) == []
    return scheduler


def spec(*hosts: dict[str, Any], **set_fields: Any) -> JobSpec:
    """A job of one set with one recipe per host requirement."""
    job_fields = {k: set_fields.pop(k) for k in ("group",) if k in set_fields}
    recipes = [{"host": host, "tasks": [{"name": "t", "run": "true"}]} for host in hosts]
    return JobSpec.model_validate(
        {"recipe_sets": [{"recipes": recipes, **set_fields}], **job_fields}
    )


def snapshot(scheduler: Scheduler) -> dict[str, Any]:
    """What must survive a restart: free systems, holders, placements, unfinished sets."""
    return {
        "free": {lab: sorted(f) for lab, f in scheduler.free.items()},
        "holders": {lab: sorted(h) for lab, h in scheduler.holders.items()},
        "held": {f: s.recipe for f, s in scheduler.systems.items()},
        "conditions": {f: s.condition for f, s in scheduler.systems.items()},
        "sets": {
            e.id: (e.lab, e.started_at, e.priority, [(r.id, r.state, r.system) for r in e.recipes])
            for e in scheduler.sets.values()
            if not e.finished
        },
    }


class Service:
    """The service's loop in miniature: schedulers fed the same events, the first one applied.

    Before a restart there is one scheduler; after it, the rebuilt one runs
    beside the one that "stopped", and every event must make both decide alike.
    """

    def __init__(self, repo: Repository) -> None:
        self.repo = repo
        self.schedulers = [build_lab(repo)]

    @property
    def live(self) -> Scheduler:
        return self.schedulers[0]

    def restart(self) -> Scheduler:
        rebuilt = bridge.rebuild(self.repo, CONFIG)
        assert snapshot(rebuilt) == snapshot(self.live)
        self.schedulers.append(rebuilt)
        return rebuilt

    def submit(self, job: JobSpec, owner: str, now: datetime) -> list[int]:
        job_id = self.repo.queue.submit_job(job, owner=owner, now=now, source_format="native")
        sets = [s.id for s in self.repo.jobs.load_job(job_id).sets]
        self.settle(lambda s: s.submit(bridge.submissions(self.repo, sets), epoch(now)), now)
        return sets

    def finish(
        self, set_id: int, outcomes: Mapping[int, RecipeState], now: datetime
    ) -> list[d.Decision]:
        for recipe, state in outcomes.items():
            self.repo.moves.move_recipe(recipe, state, now=now)
        ended = {r.id: r.state for r in self.repo.jobs.get_recipe_set(set_id).recipes}
        return self.settle(lambda s: s.finish(set_id, ended, epoch(now)), now)

    def settle(self, event: Any, now: datetime) -> list[d.Decision]:
        """Run an event on every scheduler, require one answer, commit it, submit clones."""
        answers = [event(s) for s in self.schedulers]
        assert all(a == answers[0] for a in answers[1:])
        every = list(answers[0])
        clones = []
        for action in bridge.apply(self.repo, answers[0], now=now):
            if isinstance(action, bridge.Retried):
                clones.append(action.clone)
            elif isinstance(action, Launch):
                self.dispatch(action.set, now)
        if clones:
            subs = bridge.submissions(self.repo, clones)
            every += self.settle(lambda s: s.submit(subs, epoch(now)), now)
        return every

    def condition(self, fqdn: str, condition: Condition, now: datetime) -> list[d.Decision]:
        self.repo.systems.set_condition(fqdn, condition, now=now, actor=ADMIN, reason="test")
        return self.settle(lambda s: s.change_condition(fqdn, condition, epoch(now)), now)

    def dispatch(self, set_id: int, now: datetime) -> None:
        """What the dispatcher and supervisor do with a started set: provision, run."""
        for recipe in self.repo.jobs.get_recipe_set(set_id).recipes:
            for state in STARTED:
                self.repo.moves.move_recipe(recipe.id, state, now=now)

    def started_sets(self) -> list[int]:
        return [
            u.id
            for u in self.repo.restore.unfinished_sets()
            if u.started_at is not None and all(not r.state.is_final for r in u.recipes)
        ]


def launched(actions: list[Any]) -> list[int]:
    """The sets launched, each under the claim its start was committed with."""
    out = []
    for action in actions:
        assert isinstance(action, Launch), action
        out.append(action.set)
    return out


def recipes_of(repo: Repository, set_id: int) -> list[int]:
    return [r.id for r in repo.jobs.get_recipe_set(set_id).recipes]


def test_decisions_are_committed_to_the_database(repo: Repository) -> None:
    service = Service(repo)
    assert {s.fqdn: s.usage for s in repo.systems.list_systems()} == {
        f: Usage.IDLE for f, *_ in SYSTEMS
    }
    (wide,) = service.submit(spec(X86, X86, X86, max_retries=1), "alice", at(1))
    (pair,) = service.submit(spec(ANY, ANY, max_time=100), "bob", at(2))
    (waiter,) = service.submit(spec(X86, X86, X86), "bob", at(3))
    stored = repo.jobs.get_recipe_set(wide)
    assert (stored.lab, stored.started_at) == ("lab1", at(1))
    assert [(r.state, r.system) for r in stored.recipes] == [
        (RecipeState.RUNNING, f) for f in ("a1", "a2", "a3")
    ]
    assert repo.jobs.get_recipe_set(pair).lab == "lab2"
    # The third set holds the one x86 system left in lab2 and waits for two more.
    held = repo.jobs.get_recipe_set(waiter)
    assert held.started_at is None
    assert [(r.state, r.system) for r in held.recipes] == [
        (RecipeState.SCHEDULED, "b3"),
        (RecipeState.ASSIGNED, None),
        (RecipeState.ASSIGNED, None),
    ]
    assert repo.systems.get_system("b3").usage is Usage.SCHEDULED
    assert repo.systems.get_system("a4").usage is Usage.IDLE
    assert [h.state for h in repo.moves.recipe_history(held.recipes[1].id)] == [
        RecipeState.NEW,
        RecipeState.ASSIGNED,
    ]
    # An abort retries the set on the job, excluding where it aborted.
    # A supervisor reports one recipe ended; the set ends with the last one.
    repo.moves.move_recipe(stored.recipes[0].id, RecipeState.ABORTED, now=at(5), reason="timeout")
    assert repo.jobs.get_recipe_set(wide).finished_at is None
    assert repo.moves.recipe_history(stored.recipes[0].id)[-1].reason == "timeout"
    others = dict.fromkeys(recipes_of(repo, wide)[1:], RecipeState.COMPLETED)
    decisions = service.finish(wide, others, at(6))
    (retry,) = [x for x in decisions if isinstance(x, d.Retry)]
    view = repo.jobs.load_job(repo.jobs.get_recipe_set(wide).job_id)
    clone = view.current_sets[0]
    assert (clone.retry_of, clone.attempt, clone.submitted_at) == (wide, 2, at(6))
    assert [r.exclude for r in clone.spec.recipes] == [["a1"], [], []]
    assert repo.jobs.get_recipe_set(wide).finished_at == at(6)
    assert repo.systems.consecutive_aborts("a1") == 1
    assert repo.systems.consecutive_aborts("a2") == 0
    assert clone.state in (RecipeState.QUEUED, RecipeState.ASSIGNED, RecipeState.RUNNING)
    assert retry.excluded[0] == frozenset({"a1"})


def test_the_services_own_steps_submit_and_finish(repo: Repository) -> None:
    scheduler = build_lab(repo)
    job_id = repo.queue.submit_job(
        spec(X86, max_retries=1), owner="bob", now=at(1), source_format="native"
    )
    (set_id,) = [s.id for s in repo.jobs.load_job(job_id).sets]
    assert launched(bridge.submit_job(repo, scheduler, job_id, now=at(1))) == [set_id]
    (recipe,) = recipes_of(repo, set_id)
    with pytest.raises(ValueError, match="no outcome"):
        bridge.finish(repo, scheduler, set_id, now=at(2))
    assert repo.moves.recipe_state(recipe) is RecipeState.SCHEDULED  # nothing half-done
    starts = bridge.finish(
        repo, scheduler, set_id, now=at(3), outcomes={recipe: RecipeState.ABORTED}, reason="lost"
    )
    clone = repo.jobs.load_job(job_id).current_sets[0]
    assert clone.retry_of == set_id
    assert launched(starts) == [clone.id]  # the clone went to the core at once
    assert clone.id in scheduler.sets
    assert clone.spec.recipes[0].exclude == ["a1"]
    assert repo.moves.recipe_history(recipe)[-1].reason == "lost"
    assert snapshot(bridge.rebuild(repo, CONFIG)) == snapshot(scheduler)


def test_a_cancelled_holder_and_a_stopped_runner_are_committed(repo: Repository) -> None:
    service = Service(repo)
    (wide,) = service.submit(spec(X86, X86, X86), "alice", at(1))
    (pair,) = service.submit(spec(ANY, ANY), "bob", at(2))
    (waiter,) = service.submit(spec(X86, X86, X86), "bob", at(3))
    decisions = service.settle(lambda s: s.cancel([waiter, wide], epoch(at(4)), "user"), at(4))
    assert d.Stop(wide, "user") in decisions
    assert repo.jobs.get_recipe_set(wide).stop_reason == "user"
    assert repo.jobs.get_recipe_set(waiter).state is RecipeState.CANCELLED
    assert repo.systems.get_system("b3").usage is Usage.IDLE  # released, then nothing wanted it
    claim = repo.supervisors.claim_of(wide)
    assert claim is not None  # started under a claim, never taken up
    assert repo.supervisors.heartbeat(wide, now=at(5), claim=claim) is Beat.LOST
    del pair


def test_a_restarted_scheduler_takes_the_same_decisions(repo: Repository) -> None:
    service = Service(repo)
    (wide,) = service.submit(spec(X86, X86, X86, max_retries=1), "alice", at(1))
    (pair,) = service.submit(spec(ANY, ANY, max_time=100), "bob", at(2))
    (holder,) = service.submit(spec(X86, X86, X86), "bob", at(3))
    (big,) = service.submit(spec(BIG, BIG, group="kernel-qe"), "alice", at(4))
    # A supervisor reported one recipe ended before the service stopped.
    last = recipes_of(repo, wide)[2]
    repo.moves.move_recipe(last, RecipeState.COMPLETED, now=at(5))
    assert repo.systems.get_system("a3").usage is Usage.PENDING

    rebuilt = service.restart()
    assert rebuilt.holders["lab2"] == {holder}
    assert bridge.resume(repo, rebuilt, now=at(5)) == []  # a3 stays the core's until finish

    a1, a2, _ = recipes_of(repo, wide)
    grown = service.finish(
        pair, dict.fromkeys(recipes_of(repo, pair), RecipeState.COMPLETED), at(6)
    )
    assert d.Start(holder, "lab2") in grown
    retried = service.finish(wide, {a1: RecipeState.ABORTED, a2: RecipeState.COMPLETED}, at(7))
    assert any(isinstance(x, d.Retry) for x in retried)
    assert d.Start(big, "lab1") in retried
    service.settle(lambda s: s.consistency_pass(epoch(at(8))), at(8))
    service.submit(spec(ANY), "bob", at(9))
    service.condition("a1", Condition.BROKEN, at(10))
    for set_id in service.started_sets():
        outcomes = dict.fromkeys(recipes_of(repo, set_id), RecipeState.ABORTED)
        service.finish(set_id, outcomes, at(11))
    assert snapshot(rebuilt) == snapshot(service.live)
    assert snapshot(bridge.rebuild(repo, CONFIG)) == snapshot(service.live)


def test_resume_catches_up_on_what_a_crash_left_undecided(repo: Repository) -> None:
    service = Service(repo)
    # Stored, but the service stopped before the core heard of it.
    job_id = repo.queue.submit_job(spec(X86, X86), owner="bob", now=at(1), source_format="native")
    repo.systems.set_usage("a4", Usage.PENDING, now=at(1))
    rebuilt = bridge.rebuild(repo, CONFIG)
    assert rebuilt.sets == {}
    starts = bridge.resume(repo, rebuilt, now=at(2))
    (set_id,) = [s.id for s in repo.jobs.load_job(job_id).sets]
    assert launched(starts) == [set_id]
    assert repo.jobs.get_recipe_set(set_id).started_at == at(2)
    assert repo.systems.get_system("a4").usage is Usage.IDLE
    assert bridge.resume(repo, rebuilt, now=at(3)) == []
    del service


def test_rebuild_refuses_a_database_it_cannot_believe(repo: Repository) -> None:
    service = Service(repo)
    service.submit(spec(X86, X86, X86), "alice", at(1))
    service.submit(spec(ANY, ANY), "bob", at(1))
    (holder,) = service.submit(spec(X86, X86, X86), "bob", at(1))
    (_, assigned, _) = recipes_of(repo, holder)
    repo.moves.move_recipe(assigned, RecipeState.CANCELLED, now=at(2))  # not through the core
    with pytest.raises(ValueError, match="never leaves one cancelled"):
        bridge.rebuild(repo, CONFIG)


# --- random sequences --------------------------------------------------------------------

HOSTS = st.sampled_from([X86, BIG, ANY, {"arch": "aarch64"}, {"memory_mb": {">=": 60000}}])
OUTCOMES = st.sampled_from([RecipeState.COMPLETED, RecipeState.ABORTED])


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_after_every_step_a_rebuild_equals_the_live_scheduler(
    db: Database, data: st.DataObject
) -> None:
    with db.engine.connect() as conn:
        conn.begin()
        repo = Repository(conn)
        service = Service(repo)
        steps = data.draw(st.integers(1, 12), label="steps")
        restart = data.draw(st.integers(1, steps), label="restart after")
        for step in range(1, steps + 1):
            now = at(step * 10)
            _random_step(service, data, now)  # with a restart, both schedulers decide alike
            rebuilt = bridge.rebuild(repo, CONFIG)
            assert snapshot(rebuilt) == snapshot(service.live), f"after step {step}"
            if step == restart:
                service.restart()
        conn.rollback()


def _random_step(service: Service, data: st.DataObject, now: datetime) -> None:
    running = service.started_sets()
    unfinished = [e.id for e in service.live.sets.values() if not e.finished]
    kinds = ["submit", "submit", "condition", "consistency"]
    kinds += ["finish", "finish"] if running else []
    kinds += ["cancel"] if unfinished else []
    kind = data.draw(st.sampled_from(kinds), label="kind")
    if kind == "submit":
        hosts = data.draw(st.lists(HOSTS, min_size=1, max_size=3), label="hosts")
        fields = {
            "priority": data.draw(st.sampled_from(["low", "normal", "high"]), label="priority"),
            "max_retries": data.draw(st.integers(0, 2), label="retries"),
            "max_time": data.draw(st.sampled_from([None, 50]), label="max_time"),
        }
        owner = data.draw(st.sampled_from(["alice", "bob"]), label="owner")
        if owner == "alice":
            fields["group"] = "kernel-qe"
        service.submit(spec(*hosts, **fields), owner, now)
    elif kind == "finish":
        set_id = data.draw(st.sampled_from(running), label="set")
        recipes = recipes_of(service.repo, set_id)
        outcomes = {r: data.draw(OUTCOMES, label="outcome") for r in recipes}
        service.finish(set_id, outcomes, now)
    elif kind == "cancel":
        set_id = data.draw(st.sampled_from(unfinished), label="set")
        decisions = service.settle(lambda s: s.cancel([set_id], epoch(now), "user"), now)
        if d.Stop(set_id, "user") in decisions:  # the supervisor stops, then reports
            recipes = recipes_of(service.repo, set_id)
            service.finish(set_id, dict.fromkeys(recipes, RecipeState.CANCELLED), now)
    elif kind == "condition":
        fqdn = data.draw(st.sampled_from([f for f, *_ in SYSTEMS]), label="system")
        condition = data.draw(st.sampled_from(Condition), label="condition")
        if service.repo.systems.get_system(fqdn).condition is not condition:
            service.condition(fqdn, condition, now)
    else:
        service.settle(lambda s: s.consistency_pass(epoch(now)), now)
