"""Through a real ``labq server``: a job's end reaches a local SMTP server and a webhook
receiver (signature checked), and ``labq logs prune`` deletes logs whose retention ran out."""

from __future__ import annotations

import json
import time

import httpx

from labq.domain.notices import SIGNATURE_HEADER, verify
from tests.acceptance.conftest import cli, running_server
from tests.notices.receivers import http_receiver, smtp_server

JOB = """
whiteboard: tell me when it ends
metadata:
  cc: [qa@lab.example]
  retention_tag: brief
recipe_sets:
  - recipes:
      - tasks:
          - name: hello
            run: echo hello
"""


def eventually(check, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, "not in time"
        time.sleep(0.2)
    return found


def test_a_job_end_is_mailed_and_posted_and_its_logs_pruned(tmp_path):
    with smtp_server() as mailbox, http_receiver() as hooks:
        config = tmp_path / "labq.yaml"
        config.write_text(
            "notify:\n"
            f"  smtp: {{host: 127.0.0.1, port: {mailbox.port}, owner_domain: lab.example}}\n"
            "  every: 0.2\n"
            "retention:\n"
            "  tags: {scratch: 30, brief: 0.00002, audit: null}\n"  # brief: under 2 s
        )
        with running_server(
            f"sqlite:///{tmp_path / 'labq.db'}",
            data=tmp_path / "data",
            home=tmp_path,
            log=tmp_path / "server.log",
            config=config,
        ) as server:
            env = {**server.env, "LABQ_URL": server.url, "LABQ_TOKEN": server.token}
            assert cli(env, "lab", "add", "lab1").returncode == 0
            assert cli(env, "system", "add", "s1.lab1", "--lab", "lab1").returncode == 0
            added = cli(env, "webhook", "add", hooks.url, "--json")
            assert added.returncode == 0, added.stderr
            secret = json.loads(added.stdout)["secret"]
            (tmp_path / "job.yaml").write_text(JOB)
            done = cli(env, "job", "submit", str(tmp_path / "job.yaml"), "--wait")
            assert done.returncode == 0, done.stderr

            eventually(lambda: mailbox.mails and hooks.posts)
            [(to, mail)] = mailbox.mails
            assert "qa@lab.example" in to
            assert any(a.endswith("@lab.example") and a != "qa@lab.example" for a in to)
            assert mail["Subject"].startswith("[labq] job 1 completed")
            [(headers, body)] = hooks.posts
            assert verify(secret, body, headers[SIGNATURE_HEADER.lower()])
            assert json.loads(body)["job"]["state"] == "completed"
            shown = cli(env, "job", "notifications", "1", "--json")
            assert [n["state"] for n in json.loads(shown.stdout)["notifications"]] == [
                "sent",
                "sent",
            ]

            client = httpx.Client(
                base_url=f"{server.url}/api/v1",
                headers={"Authorization": f"Bearer {server.token}"},
            )
            assert client.get("/jobs/1/logs").json()["logs"][0]["files"]
            time.sleep(2)  # the brief tag's lifetime
            pruned = cli(env, "logs", "prune", "--json")
            assert pruned.returncode == 0, pruned.stderr
            assert [p["job"] for p in json.loads(pruned.stdout)["pruned"]] == [1]
            assert client.get("/jobs/1/logs").json()["logs"][0]["files"] == []
            said = cli(env, "job", "retention", "1")
            assert "logs deleted on" in said.stdout
            client.close()
        # one email and one POST: nothing was sent twice
        assert len(mailbox.mails) == 1
        assert len(hooks.posts) == 1
