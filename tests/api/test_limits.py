"""The ``limits:`` settings through the API: 413 for size, 422 for counts, naming the limit."""

from __future__ import annotations

import json
import resource
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


def _post(lab: Lab, text: str, media: str = "application/json") -> tuple[int, dict[str, object]]:
    headers = {**lab.auth("root"), "Content-Type": media}
    answer = lab.client.post(f"{API}/jobs", content=text, headers=headers)
    return answer.status_code, answer.json().get("error", {})


def _cpu() -> float:
    """CPU seconds of this process: the app runs in it, on threads of its own."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


N = 60_000  # about 0.9 MB: under limits.document_bytes, far over limits.tasks_per_recipe
OVERSIZED = {
    "native-json": (
        "application/json",
        json.dumps({"recipe_sets": [{"recipes": [{"tasks": [{"name": "t"}] * N}]}]}),
    ),
    "native-yaml": (
        "application/yaml",
        "recipe_sets:\n- recipes:\n  - tasks:\n" + "    - name: t\n" * N,
    ),
    # the list that is too long comes last, after as many nodes as a document may have
    "native-yaml-last": (
        "application/yaml",
        "metadata:\n  a: ["
        + "1, " * 99_000
        + "]\nrecipe_sets:\n- recipes:\n  - tasks:\n"
        + "    - name: t\n" * 600,
    ),
    "beaker": (
        "application/xml",
        "<job><recipeSet><recipe>" + '<task name="t"/>' * N + "</recipe></recipeSet></job>",
    ),
    "teuthology": ("application/yaml", "roles:\n- [a]\ntasks:\n" + "- install:\n" * N),
    "teuthology-exec": (
        "application/yaml",
        "roles:\n- [a]\ntasks:\n- exec:\n    a:\n" + "    - t\n" * N,
    ),
}


@pytest.mark.parametrize("kind", OVERSIZED)
def test_an_oversized_job_is_refused_in_a_fraction_of_a_cpu_second(
    default_lab: Lab, kind: str
) -> None:
    """The limits apply while the document is read: refusing 60,000 tasks took 4-9 CPU
    seconds when the whole document was parsed first."""
    media, text = OVERSIZED[kind]
    assert len(text.encode()) < Limits().document_bytes
    before = _cpu()
    status, error = _post(default_lab, text, media)
    spent = _cpu() - before
    assert status == 422, error
    assert "limits." in str(error["message"]) or "nodes" in str(error["message"])
    assert error["line"] is not None
    assert spent < 0.5, f"{spent:.2f} CPU seconds to refuse {kind}"
    assert default_lab.get("/jobs").json()["total"] == 0


def test_a_40000_task_job_is_refused_naming_the_limit(default_lab: Lab) -> None:
    tasks = [{"name": "t"}] * 40_000
    status, error = _post(
        default_lab, json.dumps({"recipe_sets": [{"recipes": [{"tasks": tasks}]}]})
    )
    assert status == 422
    assert error["place"] == "recipe_sets[0].recipes[0].tasks"
    assert error["message"] == (
        "job:1: recipe_sets[0].recipes[0].tasks: 40000 tasks is more than the limit of 500"
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
