"""The API through a real client, over a fresh migrated SQLite database per test."""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import URL, Engine

from labq.config import Settings
from labq.domain.events import (
    ConditionChanged,
    Event,
    JobsCancelled,
    JobSubmitted,
    LocksChanged,
    PriorityChanged,
    SystemAdded,
)
from labq.domain.model import System
from labq.domain.priority import Priority
from labq.domain.queue import QueueRow, SetForecast
from labq.domain.states import Condition, RecipeState
from labq.errors import NotFoundError
from labq.formats.limits import Limits
from labq.service.inbox import SupervisorExited
from labq.service.loop import SchedulerService
from labq.store import make_engine, reading, transaction, upgrade
from labq.webapp import create_app
from tests.conftest import pg_copy
from tests.doubles import RecordingDispatcher

with warnings.catch_warnings():
    # Starlette >= 1.x asks for httpx2 behind its TestClient; httpx still works.
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

T0 = datetime(2026, 1, 1, tzinfo=UTC)
API = "/api/v1"
ON_THE_WAY = (RecipeState.WAITING, RecipeState.INSTALLING, RecipeState.RUNNING)
MAX_BODY = 64 * 1024
EXAMPLES = Path(__file__).parents[2] / "src" / "labq" / "examples"


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class Recorder:
    """Events posted, each with whether its change was already committed when it came."""

    engine: Engine
    calls: list[tuple[Event, bool]] = field(default_factory=list)
    rows: list[QueueRow] = field(default_factory=list)
    forecast: dict[int, SetForecast] = field(default_factory=dict)

    def post(self, event: Event) -> None:
        self.calls.append((event, self._committed(event)))

    def _committed(self, event: Event) -> bool:
        with reading(self.engine) as repo:
            match event:
                case JobSubmitted(job_id):
                    try:
                        repo.jobs.load_job(job_id)
                    except NotFoundError:
                        return False
                    return True
                case JobsCancelled(job_id):
                    return repo.jobs.load_job(job_id).state.value == "cancelled"
                case PriorityChanged(job_id):
                    return repo.jobs.load_job(job_id).sets[0].spec.priority.label == "low"
                case SystemAdded(fqdn):
                    return any(s.fqdn == fqdn for s in repo.systems.list_systems())
                case ConditionChanged(fqdn):
                    return repo.systems.get_system(fqdn).condition.value == "broken"
                case LocksChanged(set_id):
                    return set_id in repo.locks.held_locks([set_id])
                case _:
                    return True

    def queue_view(self) -> list[QueueRow]:
        return self.rows

    def forecasts(self) -> dict[int, SetForecast]:
        return self.forecast

    def names(self) -> list[str]:
        return [type(event).__name__ for event, _ in self.calls]


@dataclass
class Lab:
    """A client on the app with a seeded database and a token per person."""

    client: TestClient
    engine: Engine
    events: Recorder
    clock: Clock
    data_dir: Path
    tokens: dict[str, str]

    def auth(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    def get(self, url: str, who: str = "alice", **params: str | int) -> httpx.Response:
        answer: httpx.Response = self.client.get(API + url, headers=self.auth(who), params=params)
        return answer

    def post(self, url: str, who: str = "root", **kw: Any) -> httpx.Response:
        answer: httpx.Response = self.client.post(API + url, headers=self.auth(who), **kw)
        return answer

    def activity(self) -> int:
        with reading(self.engine) as repo:
            return len(repo.log.activity(limit=100_000))


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("api-template") / "labq.db"
    upgrade(f"sqlite:///{path}")
    return path


def seed(engine: Engine) -> dict[str, str]:
    """root (admin); alice and carol in kernel-qe; bob in no group. One lab, two systems.

    Pool ``perf`` (s1) is open to kernel-qe up to urgent.
    """
    tokens = {}
    with transaction(engine) as repo:
        repo.people.add_user("root", actor="setup", now=T0, admin=True)
        for name in ("alice", "bob", "carol"):
            repo.people.add_user(name, actor="root", now=T0)
        repo.people.add_group("kernel-qe", actor="root", now=T0)
        repo.people.add_member("alice", "kernel-qe", actor="root", now=T0)
        repo.people.add_member("carol", "kernel-qe", actor="root", now=T0)
        repo.systems.add_lab("lab1", actor="root", now=T0)
        repo.access.add_pool("perf", actor="root", now=T0)
        repo.access.allow("perf", "kernel-qe", Priority.URGENT, actor="root", now=T0)
        repo.systems.add_system(
            System("s1.lab", "lab1", attributes={"memory_mb": 8192}, pools=frozenset({"perf"})),
            actor="root",
            now=T0,
        )
        repo.systems.add_system(System("s2.lab", "lab1"), actor="root", now=T0)
        for name in ("root", "alice", "bob", "carol"):
            tokens[name] = repo.tokens.create_token(name, "test", now=T0)[1]
    return tokens


def add_example_systems(engine: Engine) -> None:
    """Manual systems in lab1 that the bundled example jobs match, so they are accepted."""
    smithi = {"machine_type": "smithi", "memory_mb": 16384}
    big = {**smithi, "system_type": "Machine", "cpus": 8}
    with transaction(engine) as repo:
        repo.access.add_pool("fs-team", actor="root", now=T0)
        for fqdn, attributes, pools in (
            ("ex1.lab", big, {"perf", "fs-team"}),
            ("ex2.lab", smithi, set()),
            ("ex3.lab", smithi, set()),
        ):
            system = System(
                fqdn,
                "lab1",
                attributes=attributes,
                pools=frozenset(pools),
                condition=Condition.MANUAL,
            )
            repo.systems.add_system(system, actor="root", now=T0)


@contextmanager
def open_lab(url: str | URL, tmp_path: Path, limits: Limits | None = None) -> Iterator[Lab]:
    """A seeded lab over the migrated database at ``url``, with a client on its app."""
    engine = make_engine(url)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    limits = limits or Limits(document_bytes=MAX_BODY)
    settings = Settings(data_dir=str(data_dir), limits=limits)
    events = Recorder(engine)
    clock = Clock()
    tokens = seed(engine)
    app = create_app(engine, settings, events, clock=clock)
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            yield Lab(client, engine, events, clock, data_dir, tokens)
    finally:
        engine.dispose()


@pytest.fixture
def lab(template: Path, tmp_path: Path) -> Iterator[Lab]:
    path = tmp_path / "labq.db"
    shutil.copyfile(template, path)
    with open_lab(f"sqlite:///{path}", tmp_path) as opened:
        yield opened


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_lab(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Lab]:
    """The same lab on SQLite and on PostgreSQL (a fresh copy of the migrated template)."""
    if request.param == "sqlite":
        yield request.getfixturevalue("lab")
        return
    with pg_copy(request.getfixturevalue("pg_server")) as url, open_lab(url, tmp_path) as opened:
        yield opened


def submit(lab: Lab, who: str = "alice", **fields: object) -> int:
    """A small native job, submitted as JSON; its id."""
    recipe_sets = [{"recipes": [{"role": "r0", "tasks": [{"name": "t", "run": "true"}]}]}]
    job = {"recipe_sets": recipe_sets, **fields}
    answer = lab.client.post(f"{API}/jobs", json=job, headers=lab.auth(who))
    assert answer.status_code == 201, answer.text
    job_id: int = answer.json()["id"]
    return job_id


# --- with the real scheduler service, playing the supervisors by hand ------------------

__all__ = ["RecordingDispatcher"]


def play_set(
    engine: Engine,
    service: SchedulerService,
    set_id: int,
    final: RecipeState,
    *,
    now: datetime,
    code: int = 0,
) -> None:
    """The set's supervisor moves every recipe on to ``final`` and exits with ``code``."""
    with transaction(engine) as repo:
        for recipe in repo.jobs.get_recipe_set(set_id).recipes:
            for state in (*ON_THE_WAY, final):
                repo.moves.move_recipe(recipe.id, state, now=now)
    claim = repo_claim(engine, set_id)
    service.post(SupervisorExited(set_id, code, claim))
    service.drain()


def repo_claim(engine: Engine, set_id: int) -> str:
    """The claim a started set carries (what its supervisor would report its end with)."""
    with transaction(engine) as repo:
        claim = repo.supervisors.claim_of(set_id)
    assert claim is not None, f"set {set_id} was never started"
    return claim
