"""Fault injection in full: SIGKILL the server at random, cut the leader's lock connection.

    .venv/bin/python bench/reliability.py [--kills 30] [--cuts 15] [--jobs 60] [--seed 1]

Runs, each against fresh databases: 30 server SIGKILLs under a stream of one- and
two-host jobs on SQLite, the same on PostgreSQL (LABQ_TEST_PG_URL names the
server; a database is made and dropped), and 15 cuts of the leader's advisory-lock
connection with two servers on PostgreSQL. Prints one line per run: jobs (final),
sets, task runs, runs twice, overlapping runs on one system, systems held by two
sets, orphan processes. The figures go in docs/reliability.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import create_engine, make_url, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' harness

from tests.acceptance import chaos

PG_URL = os.environ.get("LABQ_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def on_postgres(name: str, run: Callable[[str], chaos.Figures]) -> chaos.Figures:
    admin = create_engine(make_url(PG_URL), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        return run(make_url(PG_URL).set(database=name).render_as_string(hide_password=False))
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--cuts", type=int, default=15)
    parser.add_argument("--jobs", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", choices=("sqlite", "postgres", "split"), default=None)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="labq-reliability-"))
    clean = True

    def crash(url: str) -> chaos.Figures:
        lab = chaos.Lab(url, root / f"crash-{make_url(url).get_backend_name()}")
        lab.start()
        return chaos.crash(lab, kills=args.kills, jobs=args.jobs, seed=args.seed)

    def split(url: str) -> chaos.Figures:
        lab = chaos.Lab(url, root / "split", servers=2)
        lab.start()
        return chaos.split_brain(lab, cuts=args.cuts, jobs=args.jobs, seed=args.seed)

    runs: list[tuple[str, Callable[[], chaos.Figures]]] = [
        ("crash, SQLite", lambda: crash(f"sqlite:///{root / 'crash.db'}")),
        ("crash, PostgreSQL", lambda: on_postgres("labq_reliability_crash", crash)),
        ("split brain, PostgreSQL", lambda: on_postgres("labq_reliability_split", split)),
    ]
    chosen = {"sqlite": runs[:1], "postgres": runs[1:2], "split": runs[2:]}
    for name, run in chosen.get(args.only or "", runs):
        figures = run()
        clean = clean and figures.clean()
        print(chaos.report(name, figures), flush=True)
    print(f"(work files in {root})")
    sys.exit(0 if clean else 1)


if __name__ == "__main__":
    main()
