"""What a task can reach on the local backend with ``run_as: dynamic`` (docs/execution.md).

Two users' sets run side by side; Alice's task looks everywhere a task of the
same host could look: every process's environment (for another set's API token
or the database URL), the database file, the data directory, the supervisors'
settings, the other set's workspace.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.acceptance.conftest import cli, running_server, wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="run_as needs a server running as root")

CONFIG = "labs:\n  lab1:\n    local: {run_as: dynamic}\n"

BOB = """
recipe_sets:
  - recipes:
      - tasks:
          - {name: hold, run: 'id -u > uid; while [ ! -e go ]; do sleep 0.1; done', timeout: 120}
"""

# Everything Alice's task finds goes to its log directory, which the supervisor archives
# (with secrets masked: so tokens are written as their hashes).
SNOOP = r"""
out="$LABQ_LOG_DIR/found"
digest() { printf %s "$1" | sha256sum | cut -c1-16; }
echo "own=$(digest "$LABQ_TOKEN")" > "$out"
echo "uid=$(id -u)" >> "$out"
for f in /proc/[0-9]*/environ; do tr '\000' '\n' < "$f" 2>/dev/null; done \
  | grep -E '^(LABQ_TOKEN|LABQ_DB)=' | sort -u > "$LABQ_LOG_DIR/raw"
while IFS= read -r line; do
  echo "seen ${line%%=*} $(digest "${line#*=}")" >> "$out"
done < "$LABQ_LOG_DIR/raw"
rm -f "$LABQ_LOG_DIR/raw"
for f in /proc/[0-9]*/cmdline; do tr '\000' ' ' < "$f" 2>/dev/null; echo; done \
  | grep -c "[s]qlite:///$DBFILE" | sed 's/^/urls-on-command-lines /' >> "$out"
cat "$DBFILE" > /dev/null 2>&1; echo "read-db $?" >> "$out"
echo x >> "$DBFILE" 2>/dev/null; echo "write-db $?" >> "$out"
ls "$DATA" > /dev/null 2>&1; echo "list-data $?" >> "$out"
cat "$DATA"/supervisors/* > /dev/null 2>&1; echo "read-settings $?" >> "$out"
ls "$DATA/workspaces/$OTHER" > /dev/null 2>&1; echo "other-workspace $?" >> "$out"
cat "$DATA"/logs/set-*/supervisor.log > /dev/null 2>&1; echo "read-logs $?" >> "$out"
"""


def job(text: str, params: dict[str, str]) -> str:
    recipe = {"tasks": [{"name": "snoop", "run": text, "params": params, "timeout": 60}]}
    return json.dumps({"recipe_sets": [{"recipes": [recipe]}]})


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory task users can pass through (pytest's own is closed to them)."""
    path = Path(tempfile.mkdtemp(prefix="labq-isolation-", dir="/tmp"))
    path.chmod(0o711)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_task_cannot_reach_another_sets_token_or_the_database(
    tmp_path: Path, open_dir: Path
) -> None:
    data = open_dir / "data"
    database = open_dir / "labq.db"
    config = tmp_path / "labq.yaml"
    config.write_text(CONFIG)
    with (
        contextlib.ExitStack() as stack,
        running_server(
            f"sqlite:///{database}",
            data=data,
            home=tmp_path,
            log=tmp_path / "server.log",
            config=config,
        ) as server,
    ):
        admin = {**server.env, "LABQ_URL": server.url, "LABQ_TOKEN": server.token}
        env = {}
        for name in ("alice", "bob"):
            assert cli(admin, "user", "add", name).returncode == 0
            made = cli(admin, "token", "create", f"{name}'s", "--user", name, "--json")
            env[name] = {**admin, "LABQ_TOKEN": json.loads(made.stdout)["secret"]}
        assert cli(admin, "lab", "add", "lab1").returncode == 0
        for fqdn in ("a.lab1", "b.lab1"):
            assert cli(admin, "system", "add", fqdn, "--lab", "lab1").returncode == 0
        client = httpx.Client(
            base_url=f"{server.url}/api/v1",
            headers={"Authorization": f"Bearer {server.token}"},
            timeout=10,
        )
        stack.enter_context(client)
        bob_file = tmp_path / "bob.yaml"
        bob_file.write_text(BOB)
        bob = json.loads(cli(env["bob"], "job", "submit", str(bob_file), "--json").stdout)["id"]
        bob_system = _running_on(client, bob)
        other = bob_system
        alice_file = tmp_path / "alice.json"
        alice_file.write_text(
            job(SNOOP, {"DBFILE": str(database), "DATA": str(data), "OTHER": other})
        )
        alice = cli(env["alice"], "job", "submit", str(alice_file), "--wait", "--json")
        alice_id = json.loads(alice.stdout)["id"]
        assert wait_for(client, alice_id)["state"] == "completed", alice.stderr
        (data / "workspaces" / bob_system / "go").touch()
        assert wait_for(client, bob)["state"] == "completed"
        shown = client.get(f"/jobs/{alice_id}").json()
        (alice_set,) = shown["sets"]
        fqdn = alice_set["recipes"][0]["system"]
    found = (data / "logs" / f"set-{alice_set['id']}" / fqdn / "collected" / "found").read_text()
    lines = found.splitlines()
    own = lines[0].removeprefix("own=")
    empty = hashlib.sha256(b"").hexdigest()[:16]
    assert own != empty, "the task had its own set's token"
    seen = [line.removeprefix("seen ") for line in lines if line.startswith("seen ")]
    assert seen == [f"LABQ_TOKEN {own}"], "no other set's token, no database URL"
    facts = dict(
        line.split(" ", 1) for line in lines if not line.startswith(("own=", "uid=", "seen "))
    )
    assert facts["urls-on-command-lines"] == "0"
    for refused in ("read-db", "write-db", "list-data", "read-settings", "other-workspace"):
        assert facts[refused] != "0", f"{refused}: the task got in"
    assert facts["read-logs"] != "0"
    uid = int(next(line for line in lines if line.startswith("uid=")).removeprefix("uid="))
    bob_uid = int((data / "workspaces" / bob_system / "uid").read_text())
    assert 0 not in (uid, bob_uid)
    assert uid != bob_uid, "each set runs as a user of its own"


def _running_on(client: httpx.Client, job_id: int) -> str:
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        (rs,) = client.get(f"/jobs/{job_id}").json()["sets"]
        recipe = rs["recipes"][0]
        if recipe["state"] == "running" and recipe["tasks"][0]["status"] == "running":
            return str(recipe["system"])
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not start running")
