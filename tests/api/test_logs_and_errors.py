"""Log files stay inside the data directory; errors never carry a traceback; OpenAPI."""

from __future__ import annotations

from pathlib import Path

import pytest

from labq.domain.events import Event
from labq.domain.queue import QueueRow
from labq.store import transaction
from tests.api.conftest import API, T0, Lab, submit


def _with_logs(lab: Lab) -> tuple[int, Path]:
    job = submit(lab)
    folder = lab.data_dir / "logs" / "set-1" / "s1.lab"
    folder.mkdir(parents=True)
    (folder / "task-1-t.log").write_text("hello from the task\n")
    (lab.data_dir / "secret.txt").write_text("not a log of this job\n")
    with transaction(lab.engine) as repo:
        recipe = repo.jobs.load_job(job).sets[0].recipes[0].id
        repo.reports.set_log_dir(recipe, str(folder))
    return job, folder


def test_logs_are_listed_and_served(lab: Lab) -> None:
    job, _ = _with_logs(lab)
    logs = lab.get(f"/jobs/{job}/logs").json()["logs"]
    assert logs == [
        {
            "set": 1,
            "recipe": 1,
            "system": None,
            "dir": "logs/set-1/s1.lab",
            "files": ["logs/set-1/s1.lab/task-1-t.log"],
        }
    ]
    answer = lab.get(f"/jobs/{job}/logs/file", path="logs/set-1/s1.lab/task-1-t.log")
    assert answer.status_code == 200
    assert answer.text == "hello from the task\n"
    assert answer.headers["content-type"].startswith("text/plain")


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("../outside.txt", 403),
        ("logs/set-1/s1.lab/../../../../etc/passwd", 403),
        ("/etc/passwd", 403),
        ("secret.txt", 404),  # inside the data directory, but not this job's
        ("logs/set-1/s1.lab/../../set-1", 404),
        ("logs/set-1/s1.lab/nope.log", 404),
    ],
)
def test_log_paths_are_checked(lab: Lab, path: str, status: int) -> None:
    job, _ = _with_logs(lab)
    (lab.data_dir.parent / "outside.txt").write_text("outside\n")
    answer = lab.get(f"/jobs/{job}/logs/file", path=path)
    assert answer.status_code == status
    assert answer.json()["error"]["place"] == "path"
    assert "outside" not in answer.text
    assert "root:" not in answer.text


def test_symlink_out_of_the_data_dir_is_refused(lab: Lab) -> None:
    job, folder = _with_logs(lab)
    (lab.data_dir.parent / "outside.txt").write_text("outside\n")
    (folder / "link.log").symlink_to(lab.data_dir.parent / "outside.txt")
    answer = lab.get(f"/jobs/{job}/logs/file", path="logs/set-1/s1.lab/link.log")
    assert answer.status_code == 403


def test_unexpected_errors_are_500_without_traceback(
    lab: Lab, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> list[QueueRow]:
        raise RuntimeError("database password is hunter2")

    lab.events.queue_view = broken  # type: ignore[method-assign]
    answer = lab.get("/queue")
    assert answer.status_code == 500
    assert answer.json() == {"error": {"status": 500, "message": "internal error"}}
    assert "hunter2" not in answer.text
    assert "Traceback" in caplog.text or "RuntimeError" in caplog.text
    assert lab.tokens["alice"] not in caplog.text


def test_unknown_endpoint_and_method(lab: Lab) -> None:
    missing = lab.get("/nothing")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "there is no endpoint /api/v1/nothing"
    wrong = lab.client.put(f"{API}/labs", headers=lab.auth("root"))
    assert wrong.status_code == 405
    assert wrong.json()["error"]["status"] == 405


def test_events_that_fail_do_not_undo_or_fail_the_request(lab: Lab) -> None:
    def broken(event: Event) -> None:
        raise RuntimeError("scheduler queue closed")

    lab.events.post = broken  # type: ignore[method-assign]
    job = submit(lab)
    assert lab.get(f"/jobs/{job}").status_code == 200


def test_openapi_has_a_tag_per_router(lab: Lab) -> None:
    doc = lab.client.get("/openapi.json").json()
    tags = {tag for item in doc["paths"].values() for op in item.values() for tag in op["tags"]}
    assert tags == {
        "health",
        "labs",
        "distros",
        "systems",
        "pools",
        "users",
        "groups",
        "tokens",
        "jobs",
        "runs",
        "queue",
        "locks",
        "filters",
        "agents",
        "agent",
        "usage",
        "sim",
        "notifications",
        "retention",
    }
    assert "application/xml" in doc["paths"]["/api/v1/jobs"]["post"]["requestBody"]["content"]
    assert "HTTPBearer" in doc["components"]["securitySchemes"]


def test_user_last_used_is_recorded_once_a_minute(lab: Lab) -> None:
    lab.get("/users/me")
    with transaction(lab.engine) as repo:
        used = [t.last_used_at for t in repo.tokens.list_tokens("alice")]
    assert used == [T0]
