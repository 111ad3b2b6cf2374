"""Follow one submission from ``labq job submit`` to the job's end and count its hops.

    .venv/bin/python bench/hops.py [--out FILE] [--keep]

What it does, the same way every run: ``labq init`` and ``labq server`` on a fresh SQLite
database and data directory (in a temporary folder, on a free port); through the CLI, the
README's lab ``lab1``, pool ``perf`` and system ``s1.lab1``, and a new token for the
submission (so that its first request always has the server look the token up); then, with
the window open, ``labq job submit examples/job.yaml --wait`` (the README's first job: one
recipe, one task that echoes), until that command exits, which is when the job has ended.

Every labq process (the CLI, the server, its fork server, the supervisor it forks) runs
with a copy of ``bench/hops_trace`` on ``PYTHONPATH``, whose ``sitecustomize`` records each
call from a function of one labq module to a function of another while the window is open:
see its docstring. The server's background loops are not followed: the threads
``labq-housekeeping`` (``labq.service.housekeeping``: retention, reminders, metrics) and
``labq-leader`` (``labq.service.leader``: the leadership lease), which tick whether or not
anything was submitted.

Hops are taken thread by thread: the threads (a process's command and a thread name) in
the order of their first hop, and the calls of each in the order it made them; so the way
concurrent threads happen to interleave changes neither the order nor the figures. Then:

- **hops**: the distinct module-to-module call edges (``labq.a`` → ``labq.b``), each
  counted once, however often and in whichever process it was made;
- **modules**: the distinct labq modules at either end of a hop;
- **returns**: the hops, taken in that order, whose callee module had already been
  entered (at either end of an earlier hop);
- **returns to a caller**: those of the returns whose callee had itself called another
  module before: control coming back to a module that had handed it on, rather than one
  more call of a leaf such as ``labq.domain.states``;
- **climbs back**: the distinct hops that, at least once, called into a module that was
  still on the calling thread's stack below the caller: control climbing back up into a
  module that had handed it on and was waiting (a part calling its owner back, a page
  calling a route that calls the store that the page's module also calls). A generator
  expression or comprehension that another module iterates is not a climb (data handed
  down, not control handed back). This is the
  figure the reshaping of issue 23 is judged by: a layered call goes down and returns,
  it does not climb back.

Calls into labq from a library (click calling a command, uvicorn a route, a thread its
target) are *entries*: listed, not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACER = ROOT / "bench" / "hops_trace"
JOB = ROOT / "examples" / "job.yaml"
IGNORED_THREADS = ("labq-housekeeping", "labq-leader")
LABQ = Path(sys.executable).with_name("labq")


@dataclass(frozen=True)
class Call:
    """The first call of one edge in one process."""

    at: int  # time.monotonic_ns(), one clock for every process of the machine
    pid: int
    role: str
    thread: str
    kind: str  # "hop" or "entry"
    caller: str
    caller_function: str
    callee: str
    callee_function: str
    climb: str = "0"  # "1": the callee's module was already on the thread's stack


@dataclass(frozen=True)
class Figures:
    hops: list[Call]
    entries: list[Call]
    modules: list[str]
    returns: list[Call]
    returns_to_callers: list[Call]
    climbs: list[Call]  # hops into a module still on the stack below the caller
    ignored_threads: list[str]  # the threads of IGNORED_THREADS that called labq meanwhile


def main() -> None:
    """Measure once, print the figures and the ordered edges (and write them to --out)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="write the report here too")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    began = time.monotonic()
    with _folder(args.keep) as where:
        calls = follow_one_submission(where)
    report = render(count(calls), time.monotonic() - began)
    print(report)
    if args.out is not None:
        args.out.write_text(report)


def follow_one_submission(where: Path) -> list[Call]:
    """Run the server, set the lab up, then submit with the window open: every call seen."""
    trace = where / "trace"
    trace.mkdir()
    site = where / "site"
    site.mkdir()
    shutil.copy(TRACER / "sitecustomize.py", site)
    config = {"folder": str(trace), "ignore": list(IGNORED_THREADS)}
    (site / "hops_trace.json").write_text(json.dumps(config))
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABQ_")}
    env.update(
        LABQ_DB=f"sqlite:///{where / 'labq.db'}",
        LABQ_DATA_DIR=str(where / "data"),
        HOME=str(where / "home"),
        PYTHONPATH=os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")])),
    )
    token = _run(env, "init").strip().splitlines()[-1]
    port = _free_port()
    env.update(LABQ_URL=f"http://127.0.0.1:{port}", LABQ_TOKEN=token)
    with _server(env, port, where / "server.log"):
        _run(env, "lab", "add", "lab1")
        _run(env, "pool", "add", "perf")
        _run(
            env,
            "system",
            "add",
            "s1.lab1",
            "--lab",
            "lab1",
            "--attr",
            "memory_mb=8192",
            "--pool",
            "perf",
        )
        # A token of its own for the submission: its first request always looks it up (the
        # server remembers a verdict for 10 s), however slow the machine is today.
        made = json.loads(_run(env, "token", "create", "hops", "--json"))
        env["LABQ_TOKEN"] = made["secret"]
        time.sleep(1.0)  # what adding the system set off is over before the window opens
        opened = time.monotonic_ns()
        (trace / "start").touch()
        time.sleep(0.2)  # every process has looked at the window (every 20 ms)
        _run(env, "job", "submit", str(JOB), "--wait")
        closed = time.monotonic_ns()
        (trace / "stop").touch()
    return sorted((c for c in _read(trace) if opened <= c.at <= closed), key=lambda c: c.at)


def count(calls: list[Call]) -> Figures:
    """The first call of each edge over every process, in order, and the figures."""
    calls = in_order(calls)
    ignored = sorted({c.thread for c in calls if c.kind == "ignored"})
    first: dict[tuple[str, str], Call] = {}
    climbing: dict[tuple[str, str], Call] = {}
    for call in (c for c in calls if c.kind != "ignored"):
        first.setdefault((call.caller, call.callee), call)
        if call.climb == "1":
            climbing.setdefault((call.caller, call.callee), call)
    hops = [c for c in first.values() if c.kind == "hop"]
    entries = [c for c in first.values() if c.kind == "entry"]
    entered: set[str] = set()
    callers: set[str] = set()
    returns = []
    to_callers = []
    for hop in hops:
        if hop.callee in entered:
            returns.append(hop)
            if hop.callee in callers:
                to_callers.append(hop)
        entered |= {hop.caller, hop.callee}
        callers.add(hop.caller)
    climbs = list(climbing.values())
    return Figures(hops, entries, sorted(entered), returns, to_callers, climbs, ignored)


def in_order(calls: list[Call]) -> list[Call]:
    """Thread by thread, in the order of their first hops; each thread's calls in its order.
    A thread is a process's command and a thread name (the workers of a pool are one)."""
    calls = sorted(calls, key=lambda c: c.at)
    rank: dict[tuple[str, str], int] = {}
    for call in calls:
        if call.kind == "hop":
            rank.setdefault((call.role, call.thread), len(rank))
    last = len(rank)  # a thread that made no hop: its entries last
    return sorted(calls, key=lambda c: (rank.get((c.role, c.thread), last), c.at))


def render(figures: Figures, seconds: float) -> str:
    """The figures, then every hop in order (↩ marks a return), then the entries."""
    again = {(c.caller, c.callee) for c in figures.returns}
    back = {(c.caller, c.callee) for c in figures.returns_to_callers}
    lines = [
        "labq job submit examples/job.yaml --wait, followed to the job's end (bench/hops.py)",
        f"hops {len(figures.hops)}, modules {len(figures.modules)}, "
        f"returns {len(figures.returns)}, returns to a caller {len(figures.returns_to_callers)},"
        f" climbs back {len(figures.climbs)}"
        f" (entries from libraries {len(figures.entries)}; measured in {seconds:.0f} s)",
        "",
        "hops in order (thread by thread), ↩ a return, ⇐ a return to a caller",
        "[process, thread; the calling function → the called one]:",
    ]
    for n, hop in enumerate(figures.hops, 1):
        key = (hop.caller, hop.callee)
        mark = "⇐" if key in back else "↩" if key in again else " "
        lines.append(
            f"{n:3} {mark} {hop.caller} → {hop.callee}"
            f"   [{hop.role}; {hop.thread}; {hop.caller_function} → {hop.callee_function}]"
        )
    lines += ["", "climbs back: calls into a module still on the stack below the caller"]
    for hop in figures.climbs:
        lines.append(
            f"      {hop.caller} → {hop.callee}"
            f"   [{hop.role}; {hop.thread}; {hop.caller_function} → {hop.callee_function}]"
        )
    threads = Counter(f"{hop.role}: {hop.thread}" for hop in figures.hops)
    lines += ["", "threads that made hops (first calls): process: thread, hops"]
    lines += [f"      {name}: {n}" for name, n in sorted(threads.items())]
    lines.append(f"threads not followed, seen calling labq: {', '.join(figures.ignored_threads)}")
    lines += ["", "entries (a library calling into labq), in order:"]
    for entry in figures.entries:
        lines.append(f"      {entry.caller} → {entry.callee}   [{entry.role}; {entry.thread}]")
    return "\n".join(lines) + "\n"


def _read(trace: Path) -> Iterator[Call]:
    for path in trace.glob("*.tsv"):
        for line in path.read_text().splitlines():
            at, pid, role, thread, *rest = line.split("\t")
            yield Call(int(at), int(pid), role, thread, *rest)


def _run(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [str(LABQ), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        sys.exit(f"labq {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


@contextmanager
def _server(env: dict[str, str], port: int, log: Path) -> Iterator[None]:
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(LABQ), "server", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_until_up(env["LABQ_URL"], proc, log)
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _wait_until_up(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    import httpx  # labq's own dependency

    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/api/v1/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"the server did not come up:\n{log.read_text()}")
        time.sleep(0.2)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _folder(keep: bool) -> Iterator[Path]:
    if keep:
        path = Path(tempfile.mkdtemp(prefix="labq-hops-"))
        print(f"kept in {path}", file=sys.stderr)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="labq-hops-") as name:
        yield Path(name)


if __name__ == "__main__":
    main()
