"""The generated API run of the suite, with many more examples per operation.

    .venv/bin/python bench/generated_api.py [--examples 100] [--database sqlite|postgres|both]

Runs ``tests/api/test_generated.py`` (schemathesis over every operation of
``/openapi.json``, valid and invalid requests, each sent anonymously and as an
admin) with ``LABQ_GENERATED_EXAMPLES`` set, and prints pytest's summary: any
5xx, undocumented status, content type or header fails it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=100)
    parser.add_argument("--database", choices=["sqlite", "postgres", "both"], default="both")
    args = parser.parse_args()
    selected = [] if args.database == "both" else ["-k", args.database]
    env = {**os.environ, "LABQ_GENERATED_EXAMPLES": str(args.examples)}
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *selected,
            "tests/api/test_generated.py",
        ],
        cwd=ROOT,
        env=env,
        check=False,
    )
    print(f"{args.examples} examples per operation and mode, {time.monotonic() - started:.0f} s")
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
