"""Beaker's real job files: each ``<distroRequires>`` becomes a distro requirement that
reads, says itself in one line, admits the tree it describes and refuses another."""

from __future__ import annotations

import dataclasses

import pytest

from labq.domain.distro import DistroRequirement, DistroTree, requirement_of
from labq.domain.requirements import AllOf, Compare, Requirement
from labq.errors import InputError
from labq.formats.loader import load_job
from tests.realjobs import REAL_JOBS, require

FOLDER = REAL_JOBS / "beaker"
_FIELDS = {"family", "name", "variant", "arch", "version", "os_type", "os_version"}


def _requirements() -> list[tuple[str, DistroRequirement]]:
    found = []
    for path in sorted(FOLDER.rglob("*.xml")) if FOLDER.is_dir() else []:
        if "distroRequires" not in path.read_text(errors="replace"):
            continue
        try:
            spec = load_job(path)
        except InputError:
            continue  # a file labq refuses has its own verdict in the Beaker real-job tests
        for rs in spec.recipe_sets:
            for n, recipe in enumerate(rs.recipes):
                wanted = requirement_of(recipe.metadata)
                if wanted is not None:
                    found.append((f"{path.name}#{n}", wanted))
    return found


def _plain(req: Requirement) -> dict[str, str]:
    """The ``=`` terms a requirement asks for outright (not under or/not)."""
    if isinstance(req, Compare):
        return {req.prop: str(req.value)} if req.op == "=" else {}
    if isinstance(req, AllOf):
        out: dict[str, str] = {}
        for term in req.terms:
            out.update(_plain(term))
        return out
    return {}


def _tree_for(wanted: DistroRequirement) -> DistroTree:
    facts = _plain(wanted.expr)
    method = facts.get("method")
    return DistroTree(
        lab=facts.get("labcontroller", "lab1"),
        name=facts.get("name", "any"),
        arch=facts.get("arch", "x86_64"),
        url=f"{method}://trees.example/" if method else "",
        tags=frozenset({facts["tag"]}) if "tag" in facts else frozenset(),
        **{k: v for k, v in facts.items() if k in _FIELDS - {"name", "arch"}},
    )


def test_the_real_jobs_are_there() -> None:
    require(FOLDER)
    assert _requirements(), "some real Beaker job asks for a distro"


@pytest.mark.parametrize(("where", "wanted"), _requirements(), ids=lambda v: str(v)[:40])
def test_each_real_requirement_admits_its_own_tree_only(where: str, wanted: DistroRequirement):
    text = wanted.describe()
    assert "\n" not in text
    tree = _tree_for(wanted)
    assert wanted.admits(tree), (where, text)
    assert DistroRequirement.of(wanted.native()) == wanted
    if any(f in _plain(wanted.expr) for f in ("name", "family")):
        other = dataclasses.replace(tree, name="Other-1", family="Other1")
        assert not wanted.admits(other), (where, text)
