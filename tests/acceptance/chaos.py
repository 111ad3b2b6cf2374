"""Fault injection against real ``labq server`` processes: kill them, cut their leader's
lock connection, and count from the task logs and the database whether any set ran
twice, any system served two sets at once, or anything was left running.

Used in a short form by ``tests/acceptance/test_chaos.py`` and in full by
``bench/reliability.py`` (figures in ``docs/reliability.md``).

Every task appends ``start``/``tick``/``end`` lines with its set, recipe and the
time to a trace file per system, outside labq's own directories. A set that ran
twice shows two ``start`` lines for one recipe; two sets on one system at once
show overlapping spans in that system's file.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, text

from tests.acceptance.conftest import (
    free_port,
    from_template,
    labq_command,
    labq_init,
    wait_until_up,
)

FINAL = ("completed", "aborted", "cancelled")
ORPHAN_GRACE = 10.0  # seconds a supervisor may take to exit after its set's last report
TRACE_TASK = r"""
f="$TRACE/$LABQ_FQDN"; at() { date +%s.%N; }
echo "start $LABQ_SET_ID $LABQ_RECIPE_ID $(at)" >> "$f"
i=0; while [ "$i" -lt "$TICKS" ]; do
  echo "tick $LABQ_SET_ID $LABQ_RECIPE_ID $(at)" >> "$f"; sleep 0.1; i=$((i+1))
done
echo "end $LABQ_SET_ID $LABQ_RECIPE_ID $(at)" >> "$f"
"""


@dataclass
class Figures:
    """What a run found; every count but ``jobs``, ``final`` and the faults must be 0."""

    faults: int = 0
    jobs: int = 0
    final: int = 0
    sets: int = 0
    runs: int = 0
    ran_twice: int = 0
    overlaps: int = 0
    held_by_two: int = 0
    orphans: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    def clean(self) -> bool:
        """Every job final, nothing run twice, shared, or left behind."""
        return self.final == self.jobs and not (
            self.ran_twice or self.overlaps or self.held_by_two or self.orphans
        )

    def line(self) -> str:
        """One line for a report."""
        return (
            f"faults {self.faults}, jobs {self.jobs} ({self.final} final), sets {self.sets},"
            f" task runs {self.runs}; ran twice {self.ran_twice}, overlapping runs"
            f" {self.overlaps}, systems held by two sets {self.held_by_two},"
            f" orphan processes {self.orphans}; {self.seconds:.0f} s"
        )


class Lab:
    """A database, a data directory, ``count`` servers on it, and the lab's systems."""

    def __init__(self, database: str, root: Path, *, servers: int = 1, systems: int = 4) -> None:
        self.database = database
        self.root = root
        self.trace = root / "trace"
        self.trace.mkdir(parents=True, exist_ok=True)
        self.fqdns = [f"s{i}.chaos" for i in range(1, systems + 1)]
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("LABQ_")}
        self.env.update(LABQ_DB=database, LABQ_DATA_DIR=str(root / "data"), HOME=str(root / "home"))
        self.ports = [free_port() for _ in range(servers)]
        self.procs: list[subprocess.Popen[str] | None] = [None] * servers
        self.token = ""
        self.submitted: list[int] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()

    # --- servers -----------------------------------------------------------------

    def start(self) -> None:
        self.token = from_template(self.env["LABQ_DB"]) or labq_init(self.env)
        for index in range(len(self.ports)):
            self.launch(index)
        with self.client(0) as client:
            assert client.post("/labs", json={"name": "lab1"}).status_code == 201
            for fqdn in self.fqdns:
                added = client.post("/systems", json={"fqdn": fqdn, "lab": "lab1"})
                assert added.status_code == 201, added.text

    def launch(self, index: int) -> None:
        log = (self.root / f"server-{index}.log").open("a")
        proc = subprocess.Popen(
            [*labq_command(), "server", "--port", str(self.ports[index])],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        log.close()
        self.procs[index] = proc
        wait_until_up(self.url(index), proc, self.root / f"server-{index}.log")

    def kill(self, index: int) -> None:
        """SIGKILL a server and start it again."""
        proc = self.procs[index]
        assert proc is not None
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self.launch(index)

    def stop(self) -> None:
        self._stop.set()
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            if proc is not None:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

    def url(self, index: int) -> str:
        return f"http://127.0.0.1:{self.ports[index]}"

    def client(self, index: int) -> httpx.Client:
        return httpx.Client(
            base_url=f"{self.url(index)}/api/v1",
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=10,
        )

    # --- faults --------------------------------------------------------------------

    def cut_leader(self) -> int:
        """Terminate the leader's lock connection, as a network blip or a DBA would."""
        engine = create_engine(self.database, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                rows = conn.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                        " WHERE application_name = 'labq leader'"
                        " AND datname = current_database()"
                    )
                ).all()
        finally:
            engine.dispose()
        return sum(1 for row in rows if row[0])

    # --- work ------------------------------------------------------------------------

    def stream(self, jobs: int, every: float, seed: int) -> threading.Thread:
        """Submit ``jobs`` one- and two-host jobs, one every ``every`` seconds, to any server
        that answers (a submission whose answer was lost may be stored twice: fine)."""
        rng = random.Random(seed)

        def run() -> None:
            for n in range(jobs):
                if self._stop.is_set():
                    return
                self._submit(self._job(rng, n))
                time.sleep(every)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    def _job(self, rng: random.Random, n: int) -> dict[str, Any]:
        params = {"TRACE": str(self.trace), "TICKS": str(rng.randint(3, 15))}
        task = {"name": "work", "run": TRACE_TASK, "params": params, "timeout": 60}
        recipes = [{"tasks": [task]} for _ in range(rng.choice((1, 1, 2)))]
        return {
            "whiteboard": f"chaos {n}",
            "recipe_sets": [{"max_retries": 3, "max_time": 120, "recipes": recipes}],
        }

    def _submit(self, job: dict[str, Any]) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for index in range(len(self.ports)):
                try:
                    with self.client(index) as client:
                        answer = client.post("/jobs", json=job)
                except httpx.HTTPError:
                    continue
                if answer.status_code == 201:
                    with self._lock:
                        self.submitted.append(int(answer.json()["id"]))
                    return
            time.sleep(0.2)
        raise AssertionError("no server took a job for two minutes")

    def wait_final(self, timeout: float) -> None:
        """Until every job in the database is final (or the time is up)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(state in FINAL for state in self.job_states().values()):
                return
            time.sleep(0.5)

    def job_states(self) -> dict[int, str]:
        for index in range(len(self.ports)):
            try:
                with self.client(index) as client:
                    jobs = client.get("/jobs", params={"limit": 1000}).json()["jobs"]
                return {int(j["id"]): str(j["state"]) for j in jobs}
            except (httpx.HTTPError, KeyError, ValueError):
                continue
        return {}

    # --- the verdict -----------------------------------------------------------------

    def figures(self, faults: int, seconds: float) -> Figures:
        """Count what happened; stops the servers (to look for orphans)."""
        found = Figures(faults=faults, seconds=seconds)
        states = self.job_states()
        found.jobs = len(states)
        found.final = sum(1 for s in states.values() if s in FINAL)
        found.problems += [f"job {j} is {s}" for j, s in states.items() if s not in FINAL]
        spans = self._spans()
        found.runs = sum(len(v) for v in spans.values())
        for system, runs in spans.items():
            for (set_id, recipe), starts in runs.items():
                if starts[0] > 1:
                    found.ran_twice += 1
                    found.problems.append(f"recipe {recipe} of set {set_id} started twice")
            found.overlaps += _overlaps(system, runs, found.problems)
        found.sets, found.held_by_two = self._holds(found.problems)
        self.stop()  # what still runs a while after the servers stopped is an orphan
        deadline = time.monotonic() + ORPHAN_GRACE
        while (orphans := self.orphans()) and time.monotonic() < deadline:
            time.sleep(0.2)  # a supervisor that reported its set's end may still be exiting
        found.orphans = len(orphans)
        found.problems += [f"pid {pid} still runs: {cmd}" for pid, cmd in orphans.items()]
        return found

    def _spans(self) -> dict[str, dict[tuple[int, int], list[float]]]:
        """Per system, per (set, recipe): [starts, first time, last time]."""
        out: dict[str, dict[tuple[int, int], list[float]]] = {}
        for path in self.trace.iterdir():
            runs: dict[tuple[int, int], list[float]] = {}
            for line in path.read_text().splitlines():
                kind, set_id, recipe, at = line.split()
                key = (int(set_id), int(recipe))
                span = runs.setdefault(key, [0, float(at), float(at)])
                span[0] += kind == "start"
                span[1], span[2] = min(span[1], float(at)), max(span[2], float(at))
            out[path.name] = runs
        return out

    def _holds(self, problems: list[str]) -> tuple[int, int]:
        """Started sets, and pairs of them that held one system at overlapping times."""
        engine = create_engine(self.database)
        try:
            with engine.connect() as conn:
                rows = conn.execute(
                    text(
                        "SELECT r.recipe_set_id, r.system_id, r.scheduled_at, r.finished_at"
                        " FROM recipes r JOIN recipe_sets s ON s.id = r.recipe_set_id"
                        " WHERE s.started_at IS NOT NULL AND r.system_id IS NOT NULL"
                    )
                ).all()
        finally:
            engine.dispose()
        sets = {row[0] for row in rows}
        by_system: dict[int, list[tuple[Any, Any, int]]] = defaultdict(list)
        for set_id, system, began, ended in rows:
            by_system[system].append((began, ended, set_id))
        pairs = 0
        for system, held in by_system.items():
            held.sort(key=lambda h: (h[0] is None, h[0]))
            for i, (_began, ended, set_id) in enumerate(held):
                for other_began, _other_ended, other in held[i + 1 :]:
                    at_once = ended is None or (other_began is not None and other_began < ended)
                    if at_once and other != set_id:
                        pairs += 1
                        problems.append(f"system {system}: sets {set_id} and {other}")
        return len(sets), pairs

    def orphans(self) -> dict[int, str]:
        """Processes of this lab still alive (supervisors, tasks, anything with its paths)
        and their command lines."""
        needle = str(self.root).encode()
        found = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
                environ = (entry / "environ").read_bytes()
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state in ("Z", "X"):
                continue
            if needle in cmdline or needle in environ:
                found[int(entry.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace")
        return found


def _overlaps(system: str, runs: dict[tuple[int, int], list[float]], problems: list[str]) -> int:
    spans = sorted((first, last, key) for key, (_starts, first, last) in runs.items())
    count = 0
    for i, (_first, last, key) in enumerate(spans):
        for other_first, _other_last, other in spans[i + 1 :]:
            if other_first >= last:
                break
            if other[0] != key[0]:
                count += 1
                problems.append(f"{system}: set {key[0]} and set {other[0]} ran at once")
    return count


def crash(lab: Lab, *, kills: int, jobs: int, seed: int = 1) -> Figures:
    """SIGKILL the (first) server ``kills`` times at random under a stream of jobs."""
    rng = random.Random(seed)
    began = time.monotonic()
    stream = lab.stream(jobs, every=max(0.2, 2.0 * kills / jobs), seed=seed)
    for _ in range(kills):
        time.sleep(rng.uniform(0.5, 3.0))
        lab.kill(0)
    stream.join()
    lab.wait_final(timeout=240)
    return lab.figures(kills, time.monotonic() - began)


def split_brain(lab: Lab, *, cuts: int, jobs: int, seed: int = 1) -> Figures:
    """Cut the leader's lock connection ``cuts`` times at random under a stream of jobs."""
    rng = random.Random(seed)
    began = time.monotonic()
    stream = lab.stream(jobs, every=max(0.2, 2.5 * cuts / jobs), seed=seed)
    done = 0
    while done < cuts:
        time.sleep(rng.uniform(1.0, 4.0))
        done += 1 if lab.cut_leader() else 0
    stream.join()
    lab.wait_final(timeout=240)
    return lab.figures(done, time.monotonic() - began)


def report(name: str, figures: Figures) -> str:
    """A block for a report: the line, then the first problems if any."""
    lines = [f"{name}: {figures.line()}"]
    lines += [f"  {p}" for p in figures.problems[:20]]
    return "\n".join(lines)


def as_json(figures: Figures) -> str:
    return json.dumps(figures.__dict__, default=str)
