"""Job limits: every format is held to the same counts and depth, naming the limit and place."""

from __future__ import annotations

import json

import pytest

from labq.errors import InputError
from labq.formats.limits import Limits
from labq.formats.loader import Format, parse_job

SMALL = Limits(depth=8, sets_per_job=2, recipes_per_set=2, tasks_per_recipe=3)


def _native(sets: int = 1, recipes: int = 1, tasks: int = 1) -> str:
    recipe = {"tasks": [{"name": f"t{i}", "run": "true"} for i in range(tasks)]}
    return json.dumps({"recipe_sets": [{"recipes": [recipe] * recipes}] * sets})


def _beaker(recipes: int = 1, tasks: int = 1) -> str:
    task = '<task name="/distribution/check-install"/>'
    recipe = f"<recipe><distroRequires/><hostRequires/>{task * tasks}</recipe>"
    return f"<job><recipeSet>{recipe * recipes}</recipeSet></job>"


def _beaker_guest(tasks: int = 1) -> str:
    task = '<task name="/distribution/check-install"/>'
    guest = f'<guestrecipe guestname="vm">{task * (tasks - 1)}</guestrecipe>'
    return f"<job><recipeSet><recipe>{task}{guest}</recipe></recipeSet></job>"


def _teuthology(roles: int = 1) -> str:
    return "roles:\n" + "".join(f"  - [r{i}]\n" for i in range(roles)) + "tasks:\n  - install:\n"


@pytest.mark.parametrize(
    ("fmt", "text", "name", "place"),
    [
        ("native", _native(sets=3), "sets_per_job", "recipe_sets"),
        ("native", _native(recipes=3), "recipes_per_set", "recipe_sets[0].recipes"),
        ("native", _native(tasks=4), "tasks_per_recipe", "recipe_sets[0].recipes[0].tasks"),
        ("beaker", _beaker(recipes=3), "recipes_per_set", "recipe_sets[0].recipes"),
        ("beaker", _beaker(tasks=4), "tasks_per_recipe", "recipe_sets[0].recipes[0].tasks"),
        # a guest's tasks count with its host's
        ("beaker", _beaker_guest(tasks=4), "tasks_per_recipe", "recipe_sets[0].recipes[0].tasks"),
        ("teuthology", _teuthology(roles=3), "recipes_per_set", "recipe_sets[0].recipes"),
    ],
)
def test_counts_past_a_limit_are_refused_naming_it(
    fmt: Format, text: str, name: str, place: str
) -> None:
    parse_job(text, source="job", fmt=fmt, limits=SMALL.model_copy(update={name: 10**6}))
    with pytest.raises(InputError) as caught:
        parse_job(text, source="job", fmt=fmt, limits=SMALL)
    assert caught.value.place == place
    assert f"(limits.{name})" in caught.value.problem
    assert "more than the limit of" in caught.value.problem


@pytest.mark.parametrize(
    ("fmt", "text", "line"),
    [
        ("native", "recipe_sets:\n  - recipes:\n" + "      " + "[" * 9 + "]" * 9 + "\n", 3),
        ("native", '{"recipe_sets":\n' + "[" * 9 + "]" * 9 + "}", 2),
        ("teuthology", "roles: [[a]]\noverrides: " + "{a: " * 9 + "1" + "}" * 9 + "\n", 2),
        (
            "beaker",
            "<job>\n<recipeSet><recipe><hostRequires>\n"
            + "<and>" * 9
            + "</and>" * 9
            + "</hostRequires></recipe></recipeSet></job>",
            3,
        ),
    ],
    ids=["yaml", "json", "teuthology", "beaker"],
)
def test_nesting_past_the_depth_is_refused_with_its_line(fmt: Format, text: str, line: int) -> None:
    with pytest.raises(InputError) as caught:
        parse_job(text, source="job", fmt=fmt, limits=SMALL)
    assert "limits.depth" in caught.value.problem
    assert caught.value.line == line


def test_the_default_depth_allows_real_jobs_and_refuses_a_stack_overflow() -> None:
    deep = "recipe_sets: " + "[" * 100_000 + "]" * 100_000 + "\n"
    with pytest.raises(InputError, match="deeper than the limit of 64 levels"):
        parse_job(deep, source="job")
    xml = "<job>" + "<a>" * 100_000 + "</a>" * 100_000 + "</job>"
    with pytest.raises(InputError):  # lxml's own limit, or ours: never a RecursionError
        parse_job(xml, source="job")


def test_limits_outside_their_range_are_refused() -> None:
    with pytest.raises(ValueError, match="depth"):
        Limits(depth=5000)
