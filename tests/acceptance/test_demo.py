"""``labq demo``: it comes up, its sample jobs pass, and Ctrl-C stops it cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import httpx

from tests.acceptance.conftest import free_port, labq_command, wait_until_up


def test_demo_runs_its_jobs_and_stops_on_sigint(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABQ_")}
    env["HOME"] = str(tmp_path / "home")
    out_path = tmp_path / "demo.out"
    with open(out_path, "w") as out:
        proc = subprocess.Popen(
            [*labq_command(), "demo", "--port", str(port), "--dir", str(tmp_path / "demo")],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=tmp_path,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            wait_until_up(url, proc, out_path)
            token = _printed_token(out_path, proc)
            jobs = _wait_for_jobs(url, token)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=20)
    text = out_path.read_text()
    assert code in (0, 130), text
    assert "Traceback" not in text
    assert f"export LABQ_URL={url} LABQ_TOKEN={token}" in text
    assert "Ctrl-C" in text
    assert [(j["state"], j["result"]) for j in jobs] == [("completed", "pass")] * 3
    assert (tmp_path / "demo" / "labq.db").exists()


def _printed_token(path, proc) -> str:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for line in path.read_text().splitlines():
            if line.strip().startswith("lq_"):
                return line.strip()
        assert proc.poll() is None, path.read_text()
        time.sleep(0.1)
    raise AssertionError(f"no token printed:\n{path.read_text()}")


def _wait_for_jobs(url: str, token: str) -> list[dict]:
    headers = {"Authorization": f"Bearer {token}"}
    deadline = time.monotonic() + 20
    with httpx.Client(base_url=f"{url}/api/v1", headers=headers, timeout=5) as client:
        while True:
            jobs = client.get("/jobs").json()["jobs"]
            if len(jobs) == 3 and all(j["state"] in ("completed", "aborted") for j in jobs):
                return jobs
            assert time.monotonic() < deadline, jobs
            time.sleep(0.3)
