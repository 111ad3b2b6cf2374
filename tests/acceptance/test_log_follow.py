"""``labq job logs ID TASK --follow``: a line a running task writes shows within 2 s."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import time

from tests.acceptance.conftest import cli, labq_command, wait_for

JOB = """
whiteboard: followed
recipe_sets:
  - recipes:
      - tasks:
          - name: chatty
            run: >-
              echo line one;
              while [ ! -e {gate}/go ]; do sleep 0.05; done;
              echo line two;
              while [ ! -e {gate}/stop ]; do sleep 0.05; done;
              echo line three
            timeout: 120
          - {{name: quiet, run: 'echo done', timeout: 30}}
"""


class Lines:
    """A subprocess's stdout, read line by line with a deadline."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.proc = proc
        self.stream = proc.stdout
        self.select = selectors.DefaultSelector()
        self.select.register(self.stream, selectors.EVENT_READ)
        self.buf = b""

    def until(self, text: str, timeout: float) -> float:
        """Seconds it took for ``text`` to appear (fails after ``timeout``)."""
        start = time.monotonic()
        while text.encode() not in self.buf:
            left = timeout - (time.monotonic() - start)
            assert left > 0, f"{text!r} did not come within {timeout} s: {self.buf!r}"
            if self.select.select(left):
                chunk = os.read(self.stream.fileno(), 65536)
                assert chunk, f"the follower ended before {text!r}: {self.buf!r}"
                self.buf += chunk
        return time.monotonic() - start


def test_follow_sees_a_new_line_within_two_seconds(server, tmp_path):
    client, _, env = server
    gate = tmp_path / "gate"
    gate.mkdir()
    assert cli(env, "lab", "add", "lab1").returncode == 0
    assert cli(env, "system", "add", "a.lab1", "--lab", "lab1").returncode == 0
    (tmp_path / "job.yaml").write_text(JOB.format(gate=gate))
    job_id = json.loads(cli(env, "job", "submit", str(tmp_path / "job.yaml"), "--json").stdout)[
        "id"
    ]
    with subprocess.Popen(
        [*labq_command(), "job", "logs", str(job_id), "chatty", "--follow"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as follower:
        try:
            lines = Lines(follower)
            lines.until("line one", timeout=60)  # the set starts, the task runs
            (gate / "go").touch()
            assert lines.until("line two", timeout=2.0) < 2.0
            # the task's file was not stored yet: the server found it by the task's id
            running = client.get(f"/jobs/{job_id}/results").json()
            assert running["sets"][0]["recipes"][0]["tasks"][0]["status"] == "running"
            (gate / "stop").touch()
            lines.until("line three", timeout=10)
            # it ends by itself once the task has ended and everything is printed
            assert follower.wait(timeout=30) == 0
        finally:
            lines.select.close()
            if follower.poll() is None:
                follower.kill()
    assert wait_for(client, job_id)["state"] == "completed"
    # a bare file name and a task id name the same file as the listing's path
    listing = client.get(f"/jobs/{job_id}/logs").json()["logs"]
    files = [f for row in listing for f in row["files"]]
    chatty = next(f for f in files if f.rsplit("/", 1)[-1].endswith("-chatty.log"))
    task_id = chatty.rsplit("/", 1)[-1].split("-")[1]
    whole = cli(env, "job", "logs", str(job_id), chatty).stdout
    assert "line one" in whole
    assert "line three" in whole
    by_file = cli(env, "job", "logs", str(job_id), chatty.rsplit("/", 1)[-1])
    assert by_file.stdout.rstrip("\n") == whole.rstrip("\n")
    by_id = json.loads(cli(env, "job", "logs", str(job_id), task_id, "--json").stdout)
    assert (by_id["path"], by_id["task"]) == (chatty, task_id)
    assert by_id["text"].rstrip("\n") == whole.rstrip("\n")
    # following an ended task prints it whole and ends at once
    ended = cli(env, "job", "logs", str(job_id), "quiet", "--follow")
    assert ended.returncode == 0
    assert "done" in ended.stdout
    missing = cli(env, "job", "logs", str(job_id), "nosuch")
    assert missing.returncode != 0
    assert missing.stderr.count("\n") == 1
    assert "no log file or task 'nosuch'" in missing.stderr
