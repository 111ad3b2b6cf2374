"""Beaker's real job files (../shared/real-jobs/beaker) with <distroRequires>: two labs, one
carrying a tree each requirement admits, the other only trees none does. Every set is
placed in the lab that carries its tree, on a system of the tree's arch; where no lab
carries it, submission refuses it naming the requirement and what exists."""

from __future__ import annotations

from pathlib import Path

import pytest

from labq.domain.distro import DistroRequirement, DistroTree, requirement_of
from labq.domain.model import AccessPolicy, System
from labq.domain.requirements import AllOf, Compare, parse
from labq.errors import InputError
from labq.formats.loader import load_job
from labq.scheduler import decisions as d
from labq.scheduler.core import Scheduler
from labq.scheduler.entries import RecipeSubmission, SetSubmission, SystemEntry
from labq.usecases.feasibility import Fleet, refuse_unrunnable
from tests.realjobs import REAL_JOBS, require

FIELDS = {"name", "family", "variant", "arch", "tag", "method"}


def beaker_jobs() -> list[Path]:
    found = []
    for path in sorted(require(REAL_JOBS / "beaker").glob("*.xml")):
        try:
            spec = load_job(path)
        except InputError:
            continue  # refused for other reasons (their verdicts: test_real_beaker_requirements)
        recipes = [r for rs in spec.recipe_sets for r in rs.recipes]
        if any(requirement_of(r.metadata) is not None for r in recipes):
            found.append(path)
    return found


def tree_for(requirement: DistroRequirement, lab: str) -> DistroTree:
    """A tree with exactly the facts the requirement's ``=`` terms name."""
    expr = requirement.expr
    terms = expr.terms if isinstance(expr, AllOf) else (expr,)
    facts = {t.prop: str(t.value) for t in terms if isinstance(t, Compare) and t.op == "="}
    assert set(facts) <= FIELDS, facts
    method = facts.get("method")
    return DistroTree(
        lab=lab,
        name=facts.get("name", "any"),
        arch=facts.get("arch", "x86_64"),
        family=facts.get("family", ""),
        variant=facts.get("variant", ""),
        url=f"{method}://trees.example.com/tree/" if method else "",
        tags=frozenset({facts["tag"]}) if "tag" in facts else frozenset(),
    )


def test_the_corpus_has_jobs_with_distro_requirements() -> None:
    assert len(beaker_jobs()) >= 15


@pytest.mark.parametrize("path", beaker_jobs() if REAL_JOBS.exists() else [], ids=lambda p: p.name)
def test_sets_are_placed_only_in_the_lab_that_carries_the_tree(path: Path) -> None:
    spec = load_job(path)
    core = Scheduler()
    needed = {}
    for rs in spec.recipe_sets:
        for recipe in rs.recipes:
            wanted = requirement_of(recipe.metadata)
            if wanted is not None:
                needed[wanted.key] = tree_for(wanted, "carrying")
    trees = list(needed.values())
    decoy = [DistroTree(lab="other", name=f"Decoy-{t.arch}", arch=t.arch) for t in trees]
    core.set_trees("carrying", trees, 0)
    core.set_trees("other", decoy, 0)
    width = sum(len(rs.recipes) for rs in spec.recipe_sets)
    arches = sorted({t.arch for t in trees} | {"x86_64"})
    for lab in ("other", "carrying"):  # "carrying" sorts after "other": no first-lab luck
        for arch in arches:
            for i in range(width):
                fqdn = f"{lab}-{arch}-{i}"
                facts = {"fqdn": fqdn, "lab": lab, "arch": arch}
                core.add_system(SystemEntry(fqdn, lab, facts, frozenset()), 0)
    ids = iter(range(1, 10_000))
    sets = []
    for rs in spec.recipe_sets:
        recipes = tuple(
            RecipeSubmission(next(ids), parse({}), distro=requirement_of(r.metadata))
            for r in rs.recipes
        )
        sets.append(SetSubmission(next(ids), 1, recipes))
    out = core.submit(sets, 1)
    started = {x.set: x.lab for x in out if isinstance(x, d.Start)}
    with_distro = {s.id for s in sets if any(r.distro is not None for r in s.recipes)}
    assert with_distro
    assert {started.get(i) for i in with_distro} == {"carrying"}
    for submitted in sets:
        for recipe in submitted.recipes:
            if recipe.distro is None:
                continue
            system = core.systems[core.recipes[recipe.id].system or ""]
            assert any(t.fits(system.facts["arch"]) and recipe.distro.admits(t) for t in trees)


def test_a_requirement_no_lab_carries_is_refused_naming_it_and_what_exists() -> None:
    path = require(REAL_JOBS / "beaker" / "bootc-beaker-job-install-s390x.xml")
    spec = load_job(path)
    systems = [System(fqdn="a", lab="lab1"), System(fqdn="b", lab="lab2", arch="s390x")]
    trees = [
        DistroTree(lab="lab1", name="Fedora-41-20241009.n.0", arch="x86_64", family="Fedora41"),
        DistroTree(lab="lab1", name="RHEL-9.4", arch="x86_64", family="RedHatEnterpriseLinux9"),
        DistroTree(lab="lab2", name="RHEL-9.4", arch="s390x", family="RedHatEnterpriseLinux9"),
    ]
    with pytest.raises(InputError) as refused:
        refuse_unrunnable(spec, Fleet.of(systems, AccessPolicy(), trees))
    assert refused.value.place == "recipe_sets[0].recipes[0].metadata.distro_requires"
    assert refused.value.problem == (
        "can never run: distro name=Fedora-41-20241009.n.0 arch=s390x: no lab carries it"
        " (lab1 has Fedora41 x86_64, RedHatEnterpriseLinux9 x86_64;"
        " lab2 has RedHatEnterpriseLinux9 s390x)"
    )
    # carried where no system of its arch is: refused too, saying so
    trees[0] = DistroTree(lab="lab1", name="Fedora-41-20241009.n.0", arch="s390x")
    with pytest.raises(InputError) as refused:
        refuse_unrunnable(spec, Fleet.of(systems, AccessPolicy(), trees))
    assert "no system it could run on is in a lab carrying it" in refused.value.problem
    # carried where such a system is: accepted
    trees.append(DistroTree(lab="lab2", name="Fedora-41-20241009.n.0", arch="s390x"))
    refuse_unrunnable(spec, Fleet.of(systems, AccessPolicy(), trees))


def test_without_any_tree_no_distro_is_refused() -> None:
    path = require(REAL_JOBS / "beaker" / "bootc-beaker-job-install-s390x.xml")
    spec = load_job(path)
    systems = [System(fqdn="a", lab="lab1", arch="s390x")]
    refuse_unrunnable(spec, Fleet.of(systems, AccessPolicy(), []))
