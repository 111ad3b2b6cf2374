import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
EXAMPLES = ROOT / "src" / "labq" / "examples"


def labq_command() -> list[str]:
    """The installed console script, as a user would run it."""
    script = Path(sys.executable).parent / "labq"
    if script.exists():
        return [str(script)]
    found = shutil.which("labq")
    if found is None:
        pytest.fail("the labq command is not installed: pip install -e .")
    return [found]


@pytest.fixture
def labq(tmp_path):
    """Run ``labq`` in a subprocess with a private data directory; returns CompletedProcess."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 60):
        full_env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("LABQ_") or k == "LABQ_TEST_PG_URL"
        }
        full_env["XDG_DATA_HOME"] = str(tmp_path / "data")
        full_env["HOME"] = str(tmp_path / "home")
        full_env.update(env or {})
        return subprocess.run(
            [*labq_command(), *args],
            capture_output=True,
            text=True,
            env=full_env,
            cwd=tmp_path,
            timeout=timeout,
            check=False,
        )

    return run
