"""A real ``labq server`` under a flood of oversized jobs: what everyone else waits meanwhile.

    .venv/bin/python bench/oversized_jobs.py [--posters 4] [--seconds 10] [--tasks 60000]

Starts ``labq init`` and ``labq server`` (SQLite, default limits: 1 MB documents,
500 tasks per recipe) in a temporary directory, adds one lab and one manual
system (so a normal job is stored, not refused as unrunnable), and measures, as
the same logged-in user:

- the reference: sequential ``GET /api/v1/health`` and submissions of a normal
  one-task job, with nothing else running;
- for each format (native JSON, native YAML, Beaker XML, Teuthology YAML):
  ``--posters`` threads posting a ~0.9 MB job of ``--tasks`` tasks over and over
  for ``--seconds`` (each refused with a 422), while health and normal
  submissions are measured again.

Prints each latency under flood as a ratio to the reference of the same run,
the wall time of a refusal, and the server's CPU per refused document (utime +
stime of its process, from /proc).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.agents import serving  # a real server, as the agents' bench starts it

NORMAL = json.dumps({"recipe_sets": [{"recipes": [{"tasks": [{"name": "t", "run": "true"}]}]}]})


def documents(tasks: int) -> dict[str, tuple[str, str]]:
    """(media type, text) of an oversized job in each format."""
    return {
        "native JSON": (
            "application/json",
            json.dumps({"recipe_sets": [{"recipes": [{"tasks": [{"name": "t"}] * tasks}]}]}),
        ),
        "native YAML": (
            "application/yaml",
            "recipe_sets:\n- recipes:\n  - tasks:\n" + "    - name: t\n" * tasks,
        ),
        "Beaker XML": (
            "application/xml",
            "<job><recipeSet><recipe>" + '<task name="t"/>' * tasks + "</recipe></recipeSet></job>",
        ),
        "Teuthology YAML": ("application/yaml", "roles:\n- [a]\ntasks:\n" + "- install:\n" * tasks),
    }


def server_cpu(pid: int) -> float:
    """CPU seconds (user + system) the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(call: Callable[[], httpx.Response], expect: int) -> float:
    started = time.perf_counter()
    answer = call()
    if answer.status_code != expect:
        raise SystemExit(f"expected {expect}, got {answer.status_code}: {answer.text[:300]}")
    return time.perf_counter() - started


def probe(client: httpx.Client, seconds: float) -> tuple[list[float], list[float]]:
    """Latencies of health checks and normal submissions, alternating, for ``seconds``."""
    health, submit = [], []
    job = {"Content-Type": "application/json"}
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        health.append(timed(lambda: client.get("/api/v1/health"), 200))
        submit.append(timed(lambda: client.post("/api/v1/jobs", content=NORMAL, headers=job), 201))
        time.sleep(0.05)
    return health, submit


def flood(
    client_of: Callable[[], httpx.Client], media: str, text: str, posters: int, seconds: float
) -> list[float]:
    """``posters`` threads posting ``text`` for ``seconds``; the wall time of each refusal."""
    refusals: list[float] = []
    body = text.encode()
    ends = time.monotonic() + seconds

    def post() -> None:
        with client_of() as client:
            while time.monotonic() < ends:
                refusals.append(
                    timed(
                        lambda: client.post(
                            "/api/v1/jobs", content=body, headers={"Content-Type": media}
                        ),
                        422,
                    )
                )

    threads = [threading.Thread(target=post) for _ in range(posters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return refusals


def probe_under_flood(
    client_of: Callable[[], httpx.Client], seconds: float
) -> tuple[list[float], list[float]]:
    with client_of() as client:
        time.sleep(0.5)  # the flood is under way
        return probe(client, seconds - 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posters", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--tasks", type=int, default=60_000)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp,
        serving(f"sqlite:///{tmp}/labq.db", Path(tmp), 1000) as server,
    ):

        def client_of() -> httpx.Client:
            auth = {"Authorization": f"Bearer {server.token}"}
            return httpx.Client(base_url=server.url, headers=auth, timeout=120)

        with client_of() as client:
            client.post("/api/v1/labs", json={"name": "bench"}).raise_for_status()
            system = {"fqdn": "s1.bench", "lab": "bench", "condition": "manual"}
            client.post("/api/v1/systems", json=system).raise_for_status()
            probe(client, 1.0)  # warm up
            base_health, base_submit = probe(client, args.seconds)
        print(
            f"reference (idle): health median {_ms(base_health)}, max {_ms([max(base_health)])};"
            f" normal submission median {_ms(base_submit)}, max {_ms([max(base_submit)])}"
        )
        for name, (media, text) in documents(args.tasks).items():
            cpu = server_cpu(server.pid)
            with ThreadPoolExecutor(1) as pool:
                probed = pool.submit(probe_under_flood, client_of, args.seconds)
                refusals = flood(client_of, media, text, args.posters, args.seconds)
                health, submit = probed.result()
            cpu = server_cpu(server.pid) - cpu
            print(
                f"{name} ({len(text.encode()) / 1e6:.2f} MB, {args.tasks} tasks),"
                f" {args.posters} posters: {len(refusals)} refused,"
                f" refusal median {_ms(refusals)} max {_ms([max(refusals)])},"
                f" server CPU {cpu / len(refusals) * 1000:.0f} ms per refusal"
                f" (incl. health and normal submissions);"
                f" health median x{statistics.median(health) / statistics.median(base_health):.1f}"
                f" max {_ms([max(health)])};"
                f" normal submission median"
                f" x{statistics.median(submit) / statistics.median(base_submit):.1f}"
                f" max {_ms([max(submit)])}"
            )


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f} ms"


if __name__ == "__main__":
    main()
