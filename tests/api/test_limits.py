"""The ``limits:`` settings through the API: 413 for size, 422 for counts, naming the limit."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from labq.formats.limits import Limits
from tests.api.conftest import API, Lab, open_lab


@pytest.fixture
def default_lab(template: Path, tmp_path: Path) -> Iterator[Lab]:
    """A lab with the default limits (the shared fixture lowers the size limit)."""
    path = tmp_path / "labq.db"
    shutil.copyfile(template, path)
    with open_lab(f"sqlite:///{path}", tmp_path, Limits()) as opened:
        yield opened


def _post(lab: Lab, text: str) -> tuple[int, dict[str, object]]:
    headers = {**lab.auth("root"), "Content-Type": "application/json"}
    answer = lab.client.post(f"{API}/jobs", content=text, headers=headers)
    return answer.status_code, answer.json().get("error", {})


def test_a_40000_task_job_is_refused_naming_the_limit(default_lab: Lab) -> None:
    tasks = [{"name": "t"}] * 40_000
    status, error = _post(
        default_lab, json.dumps({"recipe_sets": [{"recipes": [{"tasks": tasks}]}]})
    )
    assert status == 422
    assert error["place"] == "recipe_sets[0].recipes[0].tasks"
    assert error["message"] == (
        "job: recipe_sets[0].recipes[0].tasks: 40000 tasks is more than the limit of 500"
        " (limits.tasks_per_recipe)"
    )
    assert default_lab.get("/jobs").json()["total"] == 0


def test_many_sets_and_recipes_are_refused(default_lab: Lab) -> None:
    recipe = {"tasks": [{"name": "t"}]}
    status, error = _post(default_lab, json.dumps({"recipe_sets": [{"recipes": [recipe]}] * 101}))
    assert (status, error["place"]) == (422, "recipe_sets")
    assert "limits.sets_per_job" in str(error["message"])
    status, error = _post(default_lab, json.dumps({"recipe_sets": [{"recipes": [recipe] * 51}]}))
    assert (status, error["place"]) == (422, "recipe_sets[0].recipes")


def test_a_document_over_the_size_limit_is_413(default_lab: Lab) -> None:
    status, error = _post(default_lab, json.dumps({"whiteboard": "x" * 1024 * 1024}))
    assert status == 413
    assert error["message"] == "the body is larger than 1048576 bytes (limits.document_bytes)"
