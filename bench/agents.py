"""The server's side of lab agents under many agents (issue 13, item 6; not a test: run by hand).

    .venv/bin/python bench/agents.py [--agents 50] [--systems 20] [--seconds 60] [--warmup 20]
        [--db postgres|sqlite|URL] [--jobs N] [--task-seconds 0] [--min-sets 0] [--quick]
        [--json FILE]

Starts ``labq init`` and a real ``labq server`` (``heartbeat_every`` 2 s) on a
fresh database — PostgreSQL by default (LABQ_TEST_PG_URL's server, or the one
``--db URL`` names: a database is made there and dropped), or SQLite — and gives
it AGENTS labs of SYSTEMS systems, one agent token per lab, and JOBS one-recipe
jobs (``true``), submitted up front as runs of 500. Then AGENTS processes each
speak the agent protocol (``docs/operations.md``, Lab agents) the way a real
``labq agent`` whose tasks do nothing would, for SYSTEMS concurrent sets:
``hello``; a long-poll ``claim`` for as many sets as it has free slots; for each
set the numbered reports a supervisor sends, one call each (recipe installing,
running, task started, task finished, recipe completed), three log chunks (two
of the task's log, one of ``supervisor.log``), then ``ended``; and one ``beat``
every ``heartbeat_every`` naming every set it runs. They are not real agents:
a real one runs a Python supervisor per set, and 1,000 of those do not fit on
this machine — the server cannot tell the difference.

After WARMUP seconds, over a window of SECONDS (longer, up to five minutes more, until
MIN_SETS sets the scheduler started in it have ended: a small run on a loaded machine
still measures something):

- ``sets/s``: sets claimed by agents per second (each set is started by the
  scheduler when the set before it on its system ended);
- ``report ms``: p50/p99 of one report call as the agent sees it (client side);
  also for the other calls;
- ``claim ms``: p50/p99 from a set's ``started_at`` (the scheduler's start, as the
  database records it) to the agent holding the claim answer — the "within 1 s"
  target;
- ``CPU ms/1k reports``: the server process's CPU (utime + stime from
  /proc, its children included) per 1,000 report calls — everything else the
  server did in the window (claims, logs, ends, beats, the scheduler placing
  the next sets) is in it; also per set;
- the same-run references: the server's CPU per 1,000 ``GET /api/v1/health``
  calls (20 at a time, before the agents start) and a sequential health call's
  latency; each figure is also printed as a ratio to them. The database's
  batched-write rate (as ``bench/persistence.py`` measures it) is printed too.

Every claimed set must end (the agents drain their sets after the window);
the summary says how many did, and how many sets were still queued at the
window's end (0: the queue may have run dry, and ``sets/s`` undercounts: raise ``--jobs``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, make_url, select, text

from labq.store.tables import Recipes, RecipeSets

PG_URL = os.environ.get("LABQ_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
HEARTBEAT_EVERY = 2.0
RUN_BATCH = 500  # jobs per submitted run
CLAIM_WAIT = 5.0  # seconds a claim long-polls
MIN_SETS_WAIT = 300.0  # seconds the window may stay open past SECONDS for --min-sets
TICK = os.sysconf("SC_CLK_TCK")
CHUNK = b"".join(b"line %04d of a task that does nothing\n" % i for i in range(50))  # ~2 KiB


@dataclass
class Options:
    """What to run."""

    agents: int = 50
    systems: int = 20
    seconds: float = 60.0
    warmup: float = 20.0
    db: str = "postgres"
    jobs: int = 0  # 0: 3 × agents × systems
    task_seconds: float = 0.0
    min_sets: int = 0  # the window lasts until this many sets started in it have ended


# --- one agent process ----------------------------------------------------------------


@dataclass
class Record:
    """What one agent saw, with wall-clock times (``time.time()``)."""

    claimed: list[tuple[int, float]] = field(default_factory=list)  # (set, when held)
    ended: list[tuple[int, float]] = field(default_factory=list)
    calls: list[tuple[str, float, float]] = field(default_factory=list)  # (kind, at, seconds)
    failures: list[str] = field(default_factory=list)
    lost: int = 0


class Agent:
    """One lab agent's traffic: its claims, its sets' reports and logs, its beats."""

    def __init__(self, url: str, token: str, slots: int, task_seconds: float, stop: Any) -> None:
        self.url, self.token, self.slots = url, token, slots
        self.task_seconds = task_seconds
        self.stop = stop  # a multiprocessing.Event: claim no more
        self.active: dict[int, str] = {}
        self.ending: set[int] = set()  # sets whose ``ended`` is on its way: a beat may say lost
        self.freed = asyncio.Event()
        self.record = Record()
        self.client: httpx.AsyncClient

    async def run(self) -> Record:
        """Hello, then claim and run sets until told to stop, then finish the ones held."""
        limits = httpx.Limits(max_connections=self.slots + 4, max_keepalive_connections=self.slots)
        self.client = httpx.AsyncClient(
            base_url=f"{self.url}/api/v1/agent",
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=120,
            limits=limits,
        )
        async with self.client:
            hello = await self.call("hello", "POST", "/hello", json=_hello(self.slots))
            every = float(hello.json()["heartbeat_every"])
            beating = asyncio.create_task(self.beat(every))
            running: set[asyncio.Task[None]] = set()
            while not self.stop.is_set():
                free = self.slots - len(self.active)
                if free == 0:
                    self.freed.clear()
                    await self.freed.wait()
                    continue
                answer = await self.call(
                    "claim", "POST", "/claim", json={"max": free, "wait": CLAIM_WAIT}
                )
                held = time.time()
                for work in answer.json()["sets"] if answer.status_code == 200 else ():
                    self.record.claimed.append((work["set"], held))
                    self.active[work["set"]] = work["claim"]
                    task = asyncio.create_task(self.run_set(work))
                    running.add(task)
                    task.add_done_callback(running.discard)
            while running:
                await asyncio.wait(set(running))
            beating.cancel()
        return self.record

    async def call(self, kind: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request, timed; a transport error is retried (the calls are idempotent)."""
        for attempt in range(5):
            began, at = time.perf_counter(), time.time()
            try:
                answer = await self.client.request(method, path, **kwargs)
            except httpx.TransportError as exc:
                self.record.failures.append(f"{kind}: {exc!r}")
                await asyncio.sleep(0.5 * (attempt + 1))
                continue
            self.record.calls.append((kind, at, time.perf_counter() - began))
            if answer.status_code >= 400 and not (answer.status_code == 409 and kind == "ended"):
                self.record.failures.append(f"{kind} {path}: {answer.status_code} {answer.text}")
            return answer
        raise RuntimeError(f"{kind} {path}: the server did not answer")

    async def run_set(self, work: dict[str, Any]) -> None:
        """What a supervisor of a set whose tasks do nothing reports, then the end."""
        set_id, claim = int(work["set"]), str(work["claim"])
        seq = 0

        async def report(event: dict[str, Any]) -> None:
            nonlocal seq
            seq += 1
            body = {"claim": claim, "events": [{**event, "seq": seq, "at": _now()}]}
            await self.call("report", "POST", f"/sets/{set_id}/report", json=body)

        for recipe in work["plan"]["recipes"]:
            fqdn = recipe["system"]["fqdn"]
            await report({"kind": "recipe", "recipe": recipe["id"], "state": "installing"})
            await report({"kind": "recipe", "recipe": recipe["id"], "state": "running"})
            for task in recipe["tasks"]:
                await report({"kind": "task_started", "task": task["id"]})
                if self.task_seconds:
                    await asyncio.sleep(self.task_seconds)
                log = f"{fqdn}/task-{task['id']}-{task['name']}.log"
                await self.upload(set_id, claim, log, 2)
                await report(
                    {
                        "kind": "task_finished",
                        "task": task["id"],
                        "exit_code": 0,
                        "result": "pass",
                        "log": log,
                        "message": "exit 0",
                    }
                )
            await report({"kind": "recipe", "recipe": recipe["id"], "state": "completed"})
        await self.upload(set_id, claim, "supervisor.log", 1)
        body = {"claim": claim, "code": 0}
        self.ending.add(set_id)
        answer = await self.call("ended", "POST", f"/sets/{set_id}/ended", json=body)
        if answer.status_code == 200:
            self.record.ended.append((set_id, time.time()))
        else:
            self.record.lost += 1
        del self.active[set_id]
        self.ending.discard(set_id)
        self.freed.set()

    async def upload(self, set_id: int, claim: str, path: str, chunks: int) -> None:
        for i in range(chunks):
            await self.call(
                "log",
                "PUT",
                f"/sets/{set_id}/logs",
                params={"path": path, "offset": i * len(CHUNK)},
                content=CHUNK,
                headers={"X-Labq-Claim": claim},
            )

    async def beat(self, every: float) -> None:
        """One beat per ``every`` seconds, naming every set held."""
        while True:
            await asyncio.sleep(every)
            sets = [{"set": s, "claim": c} for s, c in list(self.active.items())]
            answer = await self.call(
                "beat", "POST", "/beat", json={"sets": sets, "running": len(sets)}
            )
            told = answer.json().get("sets", {}) if answer.status_code == 200 else {}
            self.record.lost += sum(
                1
                for key, word in told.items()
                if word != "carry on" and int(key) in self.active and int(key) not in self.ending
            )


def agent_process(url: str, token: str, options: Options, stop: Any, out: str) -> None:
    """An agent's process: run, then write what it saw to ``out``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops it by ``stop``
    agent = Agent(url, token, options.systems, options.task_seconds, stop)
    record = asyncio.run(agent.run())
    Path(out).write_text(json.dumps(asdict(record)))


def _hello(slots: int) -> dict[str, Any]:
    return {"version": "bench", "host": socket.gethostname(), "max_sets": slots}


def _now() -> str:
    return datetime.now(UTC).isoformat()


# --- the server, its database, its CPU ------------------------------------------------


@contextmanager
def database(kind: str, root: Path) -> Iterator[str]:
    """A fresh database: SQLite in ``root``, or a new PostgreSQL database (dropped after)."""
    if kind == "sqlite":
        yield f"sqlite:///{root / 'labq.db'}"
        return
    base = make_url(PG_URL if kind == "postgres" else kind)
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    name = f"labq_bench_agents_{os.getpid()}"
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@dataclass
class Server:
    """A running ``labq server``: URL, first admin's token, process id."""

    url: str
    token: str
    pid: int


@contextmanager
def serving(db_url: str, root: Path, max_connections: int) -> Iterator[Server]:
    """``labq init`` and ``labq server`` on a free port; SIGTERM (then kill) after."""
    labq = str(Path(sys.executable).parent / "labq")
    config = root / "labq.yaml"
    config.write_text(
        f"heartbeat_every: {HEARTBEAT_EVERY}\nserver:\n  max_connections: {max_connections}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABQ_")}
    env.update(LABQ_DB=db_url, LABQ_DATA_DIR=str(root / "data"), LABQ_CONFIG=str(config))
    env["HOME"] = str(root)
    init = subprocess.run([labq, "init"], env=env, capture_output=True, text=True, check=False)
    if init.returncode != 0:
        raise SystemExit(f"labq init failed: {init.stderr.strip()}")
    token = init.stdout.strip().splitlines()[-1]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with open(root / "server.log", "w") as log:
        proc = subprocess.Popen(
            [labq, "server", "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT
        )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_up(url, proc)
            yield Server(url, token, proc.pid)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_up(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("the server exited at start (see its log)")
        try:
            if httpx.get(f"{url}/api/v1/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit("the server did not come up")


def cpu_seconds(pids: list[int], tree: bool = True) -> float:
    """CPU (user + system) of ``pids``, their reaped children, and (``tree``) their living
    descendants; a process gone meanwhile counts nothing."""
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rfind(")") + 2 :].split()
        stats[int(entry.name)] = fields
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    total, todo = 0, list(pids)
    while todo:
        pid = todo.pop()
        fields = stats.get(pid)
        if fields is None:
            continue
        total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        if tree:
            todo += children.get(pid, [])
    return total / TICK


# --- the lab, the queue, the reference ------------------------------------------------


def populate(server: Server, options: Options) -> list[str]:
    """Labs, systems, one agent per lab, and the queued jobs; the agents' tokens."""
    tokens = []
    with httpx.Client(
        base_url=f"{server.url}/api/v1",
        headers={"Authorization": f"Bearer {server.token}"},
        timeout=300,
    ) as admin:
        for i in range(options.agents):
            lab = f"lab{i}"
            _ok(admin.post("/labs", json={"name": lab}))
            for j in range(options.systems):
                _ok(admin.post("/systems", json={"fqdn": f"s{j}.{lab}", "lab": lab}))
            tokens.append(
                _ok(admin.post("/agents", json={"name": f"agent{i}", "labs": [lab]}))["token"]
            )
        wanted = options.jobs or 3 * options.agents * options.systems
        docs = [_job(f"lab{n % options.agents}") for n in range(wanted)]
        for start in range(0, wanted, RUN_BATCH):
            batch = [
                {"name": f"j{start + k}", "document": d, "format": "native"}
                for k, d in enumerate(docs[start : start + RUN_BATCH])
            ]
            _ok(admin.post("/runs", json={"name": f"bench-{start}", "jobs": batch}))
    return tokens


def _job(lab: str) -> str:
    return json.dumps(
        {
            "recipe_sets": [
                {"recipes": [{"host": {"lab": lab}, "tasks": [{"name": "t", "run": "true"}]}]}
            ]
        }
    )


def _ok(answer: httpx.Response) -> Any:
    if answer.status_code >= 300:
        raise SystemExit(f"{answer.request.method} {answer.request.url}: {answer.text}")
    return answer.json()


def health_reference(server: Server, calls: int = 2000, concurrent: int = 20) -> dict[str, float]:
    """The server's CPU per 1,000 health calls (``concurrent`` at a time), and one
    sequential health call's latency (p50, p99)."""
    with httpx.Client(base_url=server.url) as client:
        times = []
        for _ in range(300):
            began = time.perf_counter()
            client.get("/api/v1/health").raise_for_status()
            times.append(time.perf_counter() - began)

    async def burst() -> None:
        limits = httpx.Limits(max_connections=concurrent)
        async with httpx.AsyncClient(base_url=server.url, limits=limits) as client:
            queue: asyncio.Queue[int] = asyncio.Queue()
            for n in range(calls):
                queue.put_nowait(n)

            async def worker() -> None:
                while not queue.empty():
                    queue.get_nowait()
                    (await client.get("/api/v1/health")).raise_for_status()

            await asyncio.gather(*(worker() for _ in range(concurrent)))

    before = cpu_seconds([server.pid])
    asyncio.run(burst())
    used = cpu_seconds([server.pid]) - before
    return {
        "health_cpu_ms_per_1k": used * 1000 / calls * 1000,
        "health_ms_p50": statistics.median(times) * 1000,
        "health_ms_p99": _p99(times) * 1000,
    }


def raw_write_rate(db_url: str) -> float:
    """The database's batched placement-shaped write rate, rows/s (bench/persistence.py's)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench.persistence import raw_rate

    engine = create_engine(db_url)
    try:
        return raw_rate(engine, 1000)
    finally:
        engine.dispose()


# --- the run --------------------------------------------------------------------------


def say(text: str) -> None:
    """Progress, on stderr (the summary goes to stdout)."""
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def run(options: Options) -> dict[str, Any]:
    """One whole run; the summary (see the module's docstring)."""
    with tempfile.TemporaryDirectory(prefix="labq-bench-agents-") as tmp:
        root = Path(tmp)
        with database(options.db, root) as db_url:
            max_conn = max(1000, 2 * options.agents * (options.systems + 4))
            with serving(db_url, root, max_conn) as server:
                say(f"server up at {server.url}; {options.agents} labs, agents and jobs")
                began = time.perf_counter()
                tokens = populate(server, options)
                setup = time.perf_counter() - began
                say(f"set up in {setup:.0f} s; the references")
                reference = health_reference(server)
                reference["raw_rows_per_s"] = raw_write_rate(db_url)
                say(f"{options.agents} agents: {options.warmup:.0f} s warm-up, then the window")
                summary = drive(server, db_url, tokens, options, root)
        summary.update(reference, setup_s=setup)
    return summary


def drive(
    server: Server, db_url: str, tokens: list[str], options: Options, root: Path
) -> dict[str, Any]:
    """Start the agents, measure the window, stop them, and read what they saw."""
    ctx = multiprocessing.get_context("fork")
    stop = ctx.Event()
    outs = [str(root / f"agent{i}.json") for i in range(len(tokens))]
    procs = [
        ctx.Process(target=agent_process, args=(server.url, t, options, stop, out), daemon=True)
        for t, out in zip(tokens, outs, strict=True)
    ]
    for proc in procs:
        proc.start()
    agent_pids = [p.pid for p in procs if p.pid is not None]
    try:
        time.sleep(options.warmup)
        t0 = time.time()
        cpu0, agents0 = cpu_seconds([server.pid]), cpu_seconds(agent_pids)
        time.sleep(options.seconds)
        deadline = time.monotonic() + MIN_SETS_WAIT
        while options.min_sets and time.monotonic() < deadline:
            if ended_since(db_url, t0) >= options.min_sets:
                break
            time.sleep(0.5)
        t1 = time.time()
        cpu1, agents1 = cpu_seconds([server.pid]), cpu_seconds(agent_pids)
        queued = queued_sets(db_url)
        say("window over; the agents finish their sets")
    finally:
        stop.set()
        deadline = time.monotonic() + 600 + options.task_seconds
        for proc in procs:
            proc.join(timeout=max(1.0, deadline - time.monotonic()))
    records = [json.loads(Path(out).read_text()) for out in outs if Path(out).exists()]
    summary = measure(records, db_url, t0, t1)
    window = t1 - t0
    reports = summary["reports_in_window"] or 1
    summary.update(
        agents=options.agents,
        systems=options.systems,
        window_s=window,
        agent_processes_done=len(records),
        queued_at_end=queued,
        server_cpu_s=cpu1 - cpu0,
        server_cpu_share=(cpu1 - cpu0) / window,
        server_cpu_ms_per_1k_reports=(cpu1 - cpu0) * 1000 / reports * 1000,
        server_cpu_ms_per_set=(cpu1 - cpu0) * 1000 / (summary["claimed_in_window"] or 1),
        agents_cpu_share=(agents1 - agents0) / window,
    )
    return summary


def queued_sets(db_url: str) -> int:
    """Sets not started yet: the queue the agents still had before them."""
    engine = create_engine(db_url)
    with engine.connect() as conn:
        stmt = select(RecipeSets.id).where(
            RecipeSets.started_at.is_(None), RecipeSets.finished_at.is_(None)
        )
        count = len(conn.execute(stmt).all())
    engine.dispose()
    return count


def ended_since(db_url: str, t0: float) -> int:
    """Sets the scheduler started at ``t0`` or later that have ended (an agent claimed each)."""
    engine = create_engine(db_url)
    with engine.connect() as conn:
        stmt = select(RecipeSets.started_at).where(
            RecipeSets.started_at.is_not(None), RecipeSets.finished_at.is_not(None)
        )
        count = sum(1 for at in conn.execute(stmt).scalars() if _epoch(at) >= t0)
    engine.dispose()
    return count


def _epoch(at: datetime) -> float:
    """A database time (naive ones are UTC) as a wall-clock timestamp."""
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()


def started_at(db_url: str, ids: list[int]) -> dict[int, float]:
    """When each set was started by the scheduler, as a wall-clock timestamp."""
    engine = create_engine(db_url)
    out: dict[int, float] = {}
    with engine.connect() as conn:
        for start in range(0, len(ids), 5000):
            stmt = select(RecipeSets.id, RecipeSets.started_at).where(
                RecipeSets.id.in_(ids[start : start + 5000])
            )
            for set_id, at in conn.execute(stmt):
                if at is not None:
                    out[set_id] = _epoch(at)
    engine.dispose()
    return out


def finished(db_url: str, ids: list[int]) -> int:
    """How many of ``ids`` ended with every recipe completed."""
    engine = create_engine(db_url)
    with engine.connect() as conn:
        stmt = select(Recipes.recipe_set_id, Recipes.state).where(Recipes.recipe_set_id.in_(ids))
        states: dict[int, set[str]] = {}
        for set_id, state in conn.execute(stmt):
            states.setdefault(set_id, set()).add(str(getattr(state, "value", state)))
        ended = conn.execute(
            select(RecipeSets.id).where(RecipeSets.id.in_(ids), RecipeSets.finished_at.is_not(None))
        ).scalars()
        done = sum(1 for s in ended if states.get(s) == {"completed"})
    engine.dispose()
    return done


def measure(records: list[dict[str, Any]], db_url: str, t0: float, t1: float) -> dict[str, Any]:
    """The window's figures from the agents' records."""
    claimed = [(s, at) for r in records for s, at in r["claimed"]]
    ended = {s for r in records for s, _ in r["ended"]}
    calls = [(k, at, d) for r in records for k, at, d in r["calls"]]
    in_window = [(s, at) for s, at in claimed if t0 <= at < t1]
    starts = started_at(db_url, [s for s, _ in claimed])
    # sets started before the window (the first 1,000 start before any agent is up) are
    # not counted: their wait is the set-up's
    delays = [at - starts[s] for s, at in claimed if t0 <= starts.get(s, 0) < t1]
    out: dict[str, Any] = {
        "claimed": len(claimed),
        "ended": len(ended),
        "unended": sorted({s for s, _ in claimed} - ended)[:20],
        "completed": finished(db_url, sorted(ended)) if ended else 0,
        "claimed_in_window": len(in_window),
        "started_in_window": len(delays),
        "sets_per_s": len(in_window) / (t1 - t0),
        "claim_ms_p50": _ms(delays, 50),
        "claim_ms_p99": _ms(delays, 99),
        "claim_ms_max": max(delays) * 1000 if delays else 0.0,
        "within_1s": sum(1 for d in delays if d <= 1.0) / len(delays) if delays else 0.0,
        "failures": sum(len(r["failures"]) for r in records),
        "failure_sample": [f for r in records for f in r["failures"]][:5],
        "lost": sum(r["lost"] for r in records),
    }
    for kind in ("report", "log", "ended", "beat"):
        times = [d for k, at, d in calls if k == kind and t0 <= at < t1]
        out[f"{kind}s_in_window"] = len(times)
        out[f"{kind}_ms_p50"] = _ms(times, 50)
        out[f"{kind}_ms_p99"] = _ms(times, 99)
    return out


def _ms(values: list[float], percent: int) -> float:
    if not values:
        return 0.0
    if percent == 50:
        return statistics.median(values) * 1000
    return _p99(values) * 1000


def _p99(values: list[float]) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[98]


# --- printing -------------------------------------------------------------------------


def table(s: dict[str, Any], db: str) -> str:
    """The summary as a markdown table: absolute figures and the same-run ratios."""
    health_ms, health_cpu = s["health_ms_p50"], s["health_cpu_ms_per_1k"]
    rows = [
        ("agents × systems", f"{s['agents']} × {s['systems']} ({db})", ""),
        ("sets claimed per second", f"{s['sets_per_s']:.1f}", ""),
        (
            "report call p50 / p99",
            f"{s['report_ms_p50']:.1f} / {s['report_ms_p99']:.1f} ms",
            f"×{s['report_ms_p50'] / health_ms:.1f} / ×{s['report_ms_p99'] / health_ms:.1f}"
            " a health call's p50",
        ),
        (
            "log upload p50 / p99",
            f"{s['log_ms_p50']:.1f} / {s['log_ms_p99']:.1f} ms",
            f"×{s['log_ms_p50'] / health_ms:.1f} / ×{s['log_ms_p99'] / health_ms:.1f}",
        ),
        (
            "beat p50 / p99",
            f"{s['beat_ms_p50']:.1f} / {s['beat_ms_p99']:.1f} ms",
            f"×{s['beat_ms_p50'] / health_ms:.1f} / ×{s['beat_ms_p99'] / health_ms:.1f}",
        ),
        (
            "start → claimed p50 / p99 / max",
            f"{s['claim_ms_p50']:.0f} / {s['claim_ms_p99']:.0f} / {s['claim_ms_max']:.0f} ms",
            f"{s['within_1s'] * 100:.1f} % within 1 s",
        ),
        (
            "server CPU per 1,000 reports",
            f"{s['server_cpu_ms_per_1k_reports']:.0f} ms",
            f"×{s['server_cpu_ms_per_1k_reports'] / health_cpu:.1f} per 1,000 health calls",
        ),
        (
            "server CPU per set",
            f"{s['server_cpu_ms_per_set']:.1f} ms",
            f"×{s['server_cpu_ms_per_set'] * 1000 / health_cpu:.1f} a health call",
        ),
        (
            "server / agents CPU (cores)",
            f"{s['server_cpu_share']:.2f} / {s['agents_cpu_share']:.2f}",
            "",
        ),
        (
            "reference: health call p50 / p99; CPU per 1,000",
            f"{health_ms:.2f} / {s['health_ms_p99']:.2f} ms; {health_cpu:.0f} ms",
            "",
        ),
        ("reference: batched writes", f"{s['raw_rows_per_s']:,.0f} rows/s", ""),
        (
            "claimed / ended / completed",
            f"{s['claimed']} / {s['ended']} / {s['completed']}",
            f"{s['queued_at_end']} still queued at the window's end",
        ),
    ]
    lines = ["| figure | value | same-run ratio |", "| --- | ---: | --- |"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--systems", type=int, default=20, help="systems per lab = sets per agent")
    parser.add_argument("--seconds", type=float, default=60.0, help="the measured window")
    parser.add_argument("--warmup", type=float, default=20.0)
    parser.add_argument("--db", default="postgres", help="postgres, sqlite or a PostgreSQL URL")
    parser.add_argument("--jobs", type=int, default=0, help="jobs queued (0: 3 × agents × systems)")
    parser.add_argument("--task-seconds", type=float, default=0.0, help="each task's length")
    parser.add_argument(
        "--min-sets",
        type=int,
        default=0,
        help="keep the window open until N sets started in it have ended",
    )
    parser.add_argument("--quick", action="store_true", help="4 agents × 5 sets, 10 s")
    parser.add_argument("--json", help="also write the summary to this file")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the server and drop the database
    options = Options(
        agents=args.agents,
        systems=args.systems,
        seconds=args.seconds,
        warmup=args.warmup,
        db=args.db,
        jobs=args.jobs,
        task_seconds=args.task_seconds,
        min_sets=args.min_sets,
    )
    if args.quick:
        options = Options(agents=4, systems=5, seconds=10, warmup=3, db=args.db, jobs=args.jobs)
    summary = run(options)
    print(json.dumps(summary, indent=1, sort_keys=True))
    print(table(summary, "SQLite" if options.db == "sqlite" else "PostgreSQL"))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
