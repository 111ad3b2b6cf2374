"""Distro trees in scheduling: a recipe runs only where its system's lab carries its tree."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labq.domain.distro import DistroRequirement, DistroTree
from labq.domain.requirements import parse
from labq.domain.states import RecipeState
from labq.scheduler import decisions as d
from labq.scheduler.core import Scheduler
from labq.scheduler.entries import RecipeSubmission, SetSubmission, SystemEntry
from labq.sim import runner
from labq.sim.policy import LabqPolicy
from labq.sim.scenario import parse_scenario
from labq.sim.world import World
from tests.unit.scheduler.helpers import run, systems

RHEL9 = {"name": "RHEL-9.4", "family": "RedHatEnterpriseLinux9", "version": "9.4"}
FEDORA = {"name": "Fedora-40", "family": "Fedora40", "version": "40"}
WANTS_RHEL9 = {"family": "RedHatEnterpriseLinux9"}


def job(ident, at=0, distro=WANTS_RHEL9, width=1, duration=100, **recipe):
    recipes = [{"duration": duration, "distro": distro, **recipe} for _ in range(width)]
    return {"id": ident, "submit_at": at, "recipe_sets": [{"recipes": recipes}]}


def two_labs(**extra):
    return {
        "labs": ["lab1", "lab2"],
        "systems": systems(2, "lab1") + systems(2, "lab2"),
        "distros": {"lab1": [FEDORA], "lab2": [RHEL9, FEDORA]},
        **extra,
    }


def labs_of(result, job_id):
    world = result.world
    return {
        world.ledger.systems[r.ran_on].lab
        for s in world.sets.values()
        if s.job == job_id
        for r in s.recipes
        if r.ran_on is not None
    }


def test_a_recipe_runs_only_in_the_lab_that_carries_its_tree():
    result = run(two_labs(jobs=[job(f"j{i}") for i in range(4)]))
    for i in range(4):
        assert labs_of(result, f"j{i}") == {"lab2"}
    # two at once in lab2, then two more: lab1's idle systems were never used
    starts = sorted(s.started_at for s in result.world.sets.values())
    assert starts == [0, 0, 100, 100]


def test_the_arch_must_match_the_tree():
    scenario = two_labs(jobs=[job("arm")])
    scenario["systems"] = systems(2, "lab1") + systems(2, "lab2", arch="aarch64")
    result = run(scenario)
    (only,) = result.world.sets.values()
    assert only.started_at is None
    assert "no lab carries a distro tree for family=RedHatEnterpriseLinux9" in only.error


def test_without_any_tree_anywhere_the_requirement_is_not_checked():
    scenario = two_labs(jobs=[job("j")])
    del scenario["distros"]
    result = run(scenario)
    assert labs_of(result, "j") == {"lab1"}  # the first lab by name, as before trees


def test_a_recipe_without_a_distro_runs_anywhere():
    result = run(two_labs(jobs=[job("a", distro=None, width=2), job("b", distro=None, width=2)]))
    assert labs_of(result, "a") | labs_of(result, "b") == {"lab1", "lab2"}
    assert {s.started_at for s in result.world.sets.values()} == {0}


def test_a_tree_added_later_lets_a_waiting_recipe_start():
    scenario = two_labs(
        jobs=[job("j")],
        events=[{"at": 50, "lab": "lab1", "distros": [RHEL9]}],
    )
    scenario["distros"] = {"lab1": [FEDORA], "lab2": [FEDORA]}
    result = run(scenario)
    (only,) = result.world.sets.values()
    assert only.started_at == 50
    assert labs_of(result, "j") == {"lab1"}


def test_a_tree_removed_from_every_lab_aborts_the_queued_recipe_with_the_reason():
    scenario = {
        "labs": ["lab1", "lab2"],
        "systems": systems(1, "lab1") + systems(1, "lab2"),
        "distros": {"lab1": [RHEL9, FEDORA], "lab2": [FEDORA]},
        "config": {"consistency_every": 30},
        "jobs": [job("busy", duration=1000), job("queued", at=10)],
        "events": [{"at": 20, "lab": "lab1", "distros": [FEDORA]}],
    }
    result = run(scenario)
    queued = next(s for s in result.world.sets.values() if s.job == "queued")
    assert queued.started_at is None
    assert all(r.state is RecipeState.ABORTED for r in queued.recipes)
    assert queued.error == (
        f"can never run: recipe {queued.recipes[0].id}: no lab carries a distro tree for"
        " family=RedHatEnterpriseLinux9 (the tree was removed)"
    )


def tree(lab, name="RHEL-9.4", family="RedHatEnterpriseLinux9", arch="x86_64"):
    return DistroTree(lab=lab, name=name, arch=arch, family=family)


def core_with_two_labs():
    core = Scheduler()
    core.set_trees("lab1", [tree("lab1")], 0)
    core.set_trees("lab2", [tree("lab2")], 0)
    for lab in ("lab1", "lab2"):
        for i in (1, 2):
            fqdn = f"s{i}.{lab}"
            facts = {"fqdn": fqdn, "lab": lab, "arch": "x86_64"}
            core.add_system(SystemEntry(fqdn, lab, facts, frozenset()), 0)
    return core


def submission(set_id, width, now, distro=WANTS_RHEL9):
    requirement = DistroRequirement.of(distro)
    recipes = tuple(
        RecipeSubmission(set_id * 10 + i, parse({}), distro=requirement) for i in range(width)
    )
    return SetSubmission(set_id, set_id, recipes, submitted=now)


def test_removing_a_tree_from_one_lab_gives_back_its_holds_there():
    core = core_with_two_labs()
    core.submit([submission(1, 1, 0)], 0)  # runs in lab1
    core.submit([submission(2, 1, 0)], 0)  # runs in lab1
    core.submit([submission(3, 1, 0)], 0)  # runs in lab2
    out = core.submit([submission(4, 2, 1)], 1)  # holds s2.lab2, waits for s1.lab2
    assert core.sets[4].lab == "lab2"
    assert len(core.sets[4].held) == 1
    assert not any(isinstance(x, d.Start) for x in out)
    out = core.set_trees("lab2", [], 2)
    released = [x for x in out if isinstance(x, d.Release)]
    assert [x.set for x in released] == [4]
    assert "lab2 no longer carries a distro tree" in released[0].reason
    assert core.sets[4].lab is None
    # lab1 still carries it: the set is placed there once its systems are free
    out = core.finish(1, {10: RecipeState.COMPLETED}, 3)
    out += core.finish(2, {20: RecipeState.COMPLETED}, 3)
    starts = [x for x in out if isinstance(x, d.Start)]
    assert [(x.set, x.lab) for x in starts] == [(4, "lab1")]


def test_a_pending_system_looks_no_tree_up():
    """The index answers viability: offering a system evaluates no requirement."""
    core = core_with_two_labs()
    core.submit([submission(i, 1, i) for i in range(1, 5)], 5)
    calls = 0
    admits = DistroRequirement.admits

    def counting(self, tree):
        nonlocal calls
        calls += 1
        return admits(self, tree)

    DistroRequirement.admits = counting  # type: ignore[method-assign]
    try:
        for i in range(5, 40):
            core.submit([submission(i, 1, i)], i)
        for set_id in range(1, 30):
            entry = core.sets[set_id]
            if entry.started and not entry.finished:
                core.finish(set_id, {entry.recipes[0].id: RecipeState.COMPLETED}, 50 + set_id)
    finally:
        DistroRequirement.admits = admits  # type: ignore[method-assign]
    assert calls == 0


# --- invariants over random labs, trees and tree changes ----------------------------------

FAMILIES = ["RedHatEnterpriseLinux9", "Fedora40"]
ARCHES = ["x86_64", "aarch64"]


@st.composite
def scenarios(draw):
    labs = ["lab1", "lab2"]
    trees = st.lists(
        st.builds(
            lambda family, arch: {"name": family, "family": family, "arch": arch},
            st.sampled_from(FAMILIES),
            st.sampled_from(ARCHES),
        ),
        max_size=3,
        unique_by=lambda t: (t["family"], t["arch"]),
    )
    distros = {lab: draw(trees) for lab in labs}
    lab_systems = [
        {"fqdn": f"{lab}-s{i}", "lab": lab, "arch": draw(st.sampled_from(ARCHES))}
        for lab in labs
        for i in range(draw(st.integers(1, 3)))
    ]
    wanted = st.none() | st.sampled_from(FAMILIES).map(lambda f: {"family": f})
    jobs = []
    for j in range(draw(st.integers(1, 6))):
        width = draw(st.integers(1, 2))
        distro = draw(wanted)
        recipes = [{"duration": draw(st.integers(0, 200)), "distro": distro}] * width
        jobs.append(
            {
                "id": f"j{j}",
                "submit_at": draw(st.integers(0, 300)),
                "recipe_sets": [
                    {
                        "priority": draw(st.sampled_from(["low", "normal", "high"])),
                        "recipes": recipes,
                    }
                ],
            }
        )
    events = [
        {
            "at": draw(st.integers(0, 400)),
            "lab": draw(st.sampled_from(labs)),
            "distros": draw(trees),
        }
        for _ in range(draw(st.integers(0, 3)))
    ]
    return {
        "config": {"consistency_every": 100},
        "labs": labs,
        "systems": lab_systems,
        "distros": distros,
        "jobs": jobs,
        "events": events,
    }


class Watch:
    """The trees each lab carries as the policy hears them, and every start checked by them."""

    def __init__(self):
        self.trees: dict[str, list[DistroTree]] = {}
        self.bad: list[str] = []

    def serves(self, world, recipe, fqdn):
        if recipe.distro is None or not any(self.trees.values()):
            return True
        system = world.ledger.systems[fqdn]
        return any(
            t.fits(system.arch) and recipe.distro.admits(t) for t in self.trees.get(system.lab, [])
        )

    def check(self, world, decisions):
        for decision in decisions:
            if isinstance(decision, d.Start):
                for recipe in world.sets[decision.set].recipes:
                    fqdn = recipe.ran_on
                    if fqdn is None or not self.serves(world, recipe, fqdn):
                        self.bad.append(f"set {decision.set} started on {fqdn}")

    def jumped(self, world, decisions, policy):
        """Schedules that passed over a waiting one-recipe set ranked higher that the system
        could serve (its tree included): no queue jumping."""
        for decision in decisions:
            if not isinstance(decision, d.Schedule):
                continue
            system = world.ledger.systems[decision.system]
            chosen = key(policy, world.sets[decision.set], world.now)
            for other in policy.sets.values():
                run_ = world.sets[other.id]
                if other.id == decision.set or not other.waiting or len(run_.recipes) != 1:
                    continue
                recipe = run_.recipes[0]
                viable = system.condition.value == "automated" and self.serves(
                    world, recipe, system.fqdn
                )
                if viable and key(policy, run_, world.now) > chosen:
                    self.bad.append(f"{decision.system} went to {decision.set} before {other.id}")


def key(policy, run_, now):
    nominal = policy.sets[run_.id].priority
    bump = policy.config.aging_bump_after
    aged = nominal.raised(int((now - run_.submitted) // bump), policy.config.aging_ceiling)
    return (int(aged), int(aged), -run_.submitted, -run_.id)


def simulate_watched(raw):
    watch = Watch()
    original_set_trees = LabqPolicy.set_trees
    original_apply = World.apply

    def set_trees(self, lab, trees, now):
        trees = list(trees)
        watch.trees[lab] = trees
        return original_set_trees(self, lab, trees, now)

    def apply(self, decisions):
        watch.jumped(self, decisions, self.policy)  # before the world moves
        original_apply(self, decisions)  # the world places recipes, then the check reads them
        watch.check(self, decisions)

    LabqPolicy.set_trees, World.apply = set_trees, apply  # type: ignore[method-assign]
    try:
        result = runner.simulate(parse_scenario(raw, source="hypothesis"), {}, "labq")
    finally:
        LabqPolicy.set_trees, World.apply = original_set_trees, original_apply  # type: ignore[method-assign]
    return result, watch


SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(scenarios())
def test_no_recipe_ever_starts_where_its_lab_lacks_the_tree(raw):
    _, watch = simulate_watched(raw)
    assert watch.bad == []


@SETTINGS
@given(scenarios())
def test_a_set_waits_only_while_some_lab_could_serve_it(raw):
    """Every set ends: it runs, or is aborted saying which tree no lab carries any more."""
    result, _ = simulate_watched(raw)
    for entry in result.world.sets.values():
        if entry.finished_at is None:
            raise AssertionError(f"set {entry.id} of {entry.job} never ended")
        if entry.started_at is None:
            assert (entry.error or "").startswith("can never run"), entry.error
