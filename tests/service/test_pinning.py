"""Workspace pinning through a real server: resolved at submission, run exactly."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.acceptance.test_restarts import LabServer, add_lab, job_state, wait_until


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def commit(repo: Path, content: str) -> str:
    (repo / "hello.txt").write_text(content)
    git(repo, "add", "hello.txt")
    git(repo, "commit", "--quiet", "-m", content)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def lab(tmp_path):
    server = LabServer(f"sqlite:///{tmp_path / 'labq.db'}", tmp_path)
    yield server
    server.close()


def test_a_ref_is_pinned_at_submission_and_that_commit_runs(lab, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    pinned = commit(repo, "first")
    _, client = lab.start()
    add_lab(client, "a.lab1")

    def job(branch: str) -> str:
        run = 'cat hello.txt; echo "commit $LABQ_REF_COMMIT"'
        return json.dumps(
            {
                "ref": {"repo": str(repo), "branch": branch},
                "recipe_sets": [{"recipes": [{"tasks": [{"name": "t", "run": run}]}]}],
            }
        )

    headers = {"Content-Type": "application/json"}
    refused = client.post("/jobs", content=job("nosuch"), headers=headers)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["place"] == "ref"
    assert "nosuch" in refused.json()["error"]["message"]
    assert client.get("/jobs").json()["total"] == 0, "nothing stored"

    # the branch moves on after submission: the job still runs the commit it was given
    created = client.post("/jobs", content=job("main"), headers=headers)
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    assert client.get(f"/jobs/{job_id}").json()["ref"]["commit"] == pinned
    commit(repo, "second")

    done = wait_until(lambda: job_state(client, job_id, "completed", "aborted"), "the job", 30)
    assert done["state"] == "completed", done
    archived = "\n".join(p.read_text() for p in lab.data.rglob("task-*.log"))
    assert "first" in archived
    assert "second" not in archived
    assert f"commit {pinned}" in archived
