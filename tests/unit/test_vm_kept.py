"""Whether a recipe's VM outlives it: its ``<reservesys>`` decides, by Beaker's rules,
as the service will when the set ends and reserves the slot."""

from __future__ import annotations

from typing import Any

import pytest

from labq.dispatch.provisioning import provision_environment
from labq.dispatch.teardown import reserved
from labq.domain.reservesys import may_keep, reserve_for
from labq.domain.states import RecipeState, Result

ALWAYS = {"reservesys": {"duration": 60, "when": "always"}}
ONFAIL = {"reservesys": {"duration": 60, "when": "onfail"}}


@pytest.mark.parametrize(
    ("metadata", "state", "result", "kept"),
    [
        (ALWAYS, RecipeState.COMPLETED, Result.PASS, True),
        (ALWAYS, RecipeState.CANCELLED, None, False),
        (ONFAIL, RecipeState.COMPLETED, Result.PASS, False),
        (ONFAIL, RecipeState.COMPLETED, Result.FAIL, True),
        (ONFAIL, RecipeState.ABORTED, None, True),
        ({}, RecipeState.COMPLETED, Result.PASS, False),
        ({"whiteboard": "x"}, RecipeState.ABORTED, None, False),
    ],
)
def test_the_vm_is_kept_where_the_slot_will_be_reserved(
    metadata: dict[str, Any], state: RecipeState, result: Result | None, kept: bool
) -> None:
    provision = provision_environment(metadata)
    assert reserved(provision, state, result) is kept
    assert (reserve_for(metadata, state, result) is not None) is kept


def test_an_unreadable_provision_keeps_nothing() -> None:
    assert not reserved({"LABQ_PROVISION": "{not json"}, RecipeState.COMPLETED, Result.PASS)


@pytest.mark.parametrize(
    ("metadata", "seconds"),
    [
        ({"reservesys": {"duration": 3600, "when": "onfail"}}, 3600),  # it may fail: planned
        ({"reservesys": {}}, 86_400),  # Beaker's default: a day
        ({"reservesys": {"when": "never"}}, 0),  # not a rule: keeps nothing
        ({}, 0),
        (None, 0),
    ],
)
def test_what_a_recipe_may_keep_is_planned_whatever_its_outcome(
    metadata: dict[str, Any] | None, seconds: int
) -> None:
    assert may_keep(metadata) == seconds
