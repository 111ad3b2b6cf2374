"""Adding a system says where its lab's tasks will run: a lab with no backend configured
runs them on the server's own host, and the answer says so instead of staying silent."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from labq.config import Settings
from labq.store import make_engine, transaction
from labq.webapp import create_app
from tests.api.conftest import API, T0, Clock, Recorder, TestClient, seed

HOOK = ["true"]
CLOUD = {
    "kind": "command",
    "max_vms": 2,
    "max_vcpus": 4,
    "max_memory": 4096,
    "sizes": [{"name": "small", "cpus": 1, "memory": 1024}],
    "command": {"create": HOOK, "destroy": HOOK, "list": HOOK},
}


@pytest.fixture
def client(template: Path, tmp_path: Path) -> Iterator[tuple[TestClient, str]]:
    path = tmp_path / "labq.db"
    shutil.copyfile(template, path)
    engine = make_engine(f"sqlite:///{path}")
    settings = Settings.model_validate(
        {
            "data_dir": str(tmp_path / "data"),
            "labs": {
                "rack": {"backend": "ssh", "ssh": {"user": "qa"}},
                "bench": {},
                "cloud": {"vms": CLOUD},
            },
        }
    )
    token = seed(engine)["root"]
    with transaction(engine) as repo:
        for name in ("rack", "bench", "remote", "cloud"):
            repo.systems.add_lab(name, actor="root", now=T0)
        repo.agents.create_agent("far", ["remote"], now=T0, actor="root")
    app = create_app(engine, settings, Recorder(engine), clock=Clock())
    try:
        with TestClient(app, raise_server_exceptions=False) as test_client:
            yield test_client, token
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    ("lab", "attributes", "backend", "words"),
    [
        ("lab1", {}, "local", "local backend (lab 'lab1' has no backend configured), not on s9.x"),
        ("bench", {}, "local", "local backend (lab 'bench' is set to it), not on s9.x"),
        ("rack", {}, "ssh", "runs tasks on s9.x over ssh as qa"),
        ("remote", {}, "agent", "lab 'remote' is served by a lab agent"),
        ("cloud", {"vm_size": "small"}, "command", "from the lab's command provider"),
        ("cloud", {}, "local", "local backend (lab 'cloud' is set to it)"),
    ],
)
def test_the_answer_says_where_the_labs_tasks_run(
    client: tuple[TestClient, str], lab: str, attributes: dict[str, str], backend: str, words: str
) -> None:
    test_client, token = client
    answer = test_client.post(
        f"{API}/systems",
        json={"fqdn": "s9.x", "lab": lab, "attributes": attributes},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert answer.status_code == 201, answer.text
    runs_on = answer.json()["runs_on"]
    assert runs_on["backend"] == backend
    assert words in runs_on["note"]
