"""The ``limits:`` settings through the API: 413 for size, 422 for counts, naming the limit."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from labq.formats.limits import Limits
from labq.formats.loader import read_job
from labq.usecases import submission
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
    default_lab: Lab, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limits apply while the document is read: refusing 60,000 tasks took 4-9 CPU
    seconds when the whole document was parsed first. The real parser runs, timed on
    the server's worker thread (the in-process client's own work is not the server's)."""
    spent: list[float] = []

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return read_job(*args, **kwargs)
        finally:
            spent.append(time.thread_time() - started)

    monkeypatch.setattr(submission, "read_job", timed)
    media, text = OVERSIZED[kind]
    assert len(text.encode()) < Limits().document_bytes
    status, error = _post(default_lab, text, media)
    assert status == 422, error
    assert "limits." in str(error["message"]) or "nodes" in str(error["message"])
    assert error["line"] is not None
    assert len(spent) == 1
    # CPU time, not wall time, but a loaded machine still stretches it (0.3 s alone, 0.7 s
    # beside a busy suite): the bound sits well under the 4-9 s a whole parse cost
    assert spent[0] < 2.0, f"{spent[0]:.2f} CPU seconds to refuse {kind}"
    assert default_lab.get("/jobs").json()["total"] == 0
