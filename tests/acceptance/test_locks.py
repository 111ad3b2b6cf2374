"""The lock service end to end: a task takes a lock with ``labq lock``, a declared set waits
(in the queue: the predictive queue does not start a set that would wait for a held lock)."""

from __future__ import annotations

import json
import time

from tests.acceptance.conftest import cli, labq_command, wait_for

HOLDER = """
whiteboard: takes nfs1 at run time
recipe_sets:
  - recipes:
      - tasks:
          - name: lock
            run: '{labq} lock acquire storage:nfs1 --exclusive --wait --timeout 30'
            timeout: 60
          - name: work
            run: 'while [ ! -e {done} ]; do sleep 0.1; done; echo "token is $LABQ_TOKEN"'
            timeout: 600
"""

DECLARER = """
whiteboard: declares nfs1
recipe_sets:
  - locks: {storage: {exclusive: [nfs1]}}
    recipes:
      - tasks:
          - {name: work, run: 'echo done', timeout: 30}
"""


def poll(check, timeout=90.0, what="a condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def submit(env, path, text):
    path.write_text(text)
    return json.loads(cli(env, "job", "submit", str(path), "--json").stdout)["id"]


def lab_with_a_holder(env, tmp_path):
    """lab1 with two systems, and the holder job submitted: its task takes nfs1 and holds it
    until the file :func:`release` makes is there. Its id."""
    assert cli(env, "lab", "add", "lab1").returncode == 0
    for fqdn in ("a.lab1", "b.lab1"):
        assert cli(env, "system", "add", fqdn, "--lab", "lab1").returncode == 0
    holder = HOLDER.format(labq=labq_command()[0], done=tmp_path / "done")
    return submit(env, tmp_path / "holder.yaml", holder)


def release(tmp_path):
    """The holder's task ends (and with its set, nfs1 is released)."""
    (tmp_path / "done").touch()


def test_a_set_waits_for_a_lock_a_task_holds_and_runs_once_it_is_released(server, tmp_path):
    client, data, env = server
    holder = lab_with_a_holder(env, tmp_path)
    held = poll(
        lambda: [h for h in client.get("/locks").json()["held"] if h["name"] == "nfs1"],
        what="the task to take nfs1",
    )
    assert held[0]["exclusive"] is True
    holder_set = held[0]["set"]

    declarer = submit(env, tmp_path / "declarer.yaml", DECLARER)
    # it would only wait for nfs1 in a running slot: the queue keeps it, and says why
    kept = poll(
        lambda: [r for r in client.get("/queue").json()["queue"] if r["job_id"] == declarer],
        what="the declared set in the queue",
    )
    assert kept[0]["waits_for"] == f"waits for lock storage:nfs1 held by set {holder_set}"
    assert client.get("/locks").json()["waiting"] == []
    shown = client.get(f"/jobs/{declarer}").json()
    assert {r["state"] for r in shown["sets"][0]["recipes"]} == {"queued"}
    listed = cli(env, "lock", "list")
    assert listed.returncode == 0
    assert "nfs1" in listed.stdout
    queued = cli(env, "queue")
    assert f"held by set {holder_set}" in queued.stdout

    release(tmp_path)
    assert wait_for(client, holder)["state"] == "completed"
    assert wait_for(client, declarer)["state"] == "completed"
    history = client.get(f"/jobs/{declarer}/history").json()["recipes"][0]["history"]
    running_at = next(h["at"] for h in history if h["state"] == "running")
    holder_history = client.get(f"/jobs/{holder}/history").json()["recipes"][0]["history"]
    holder_done = next(h["at"] for h in holder_history if h["state"] == "completed")
    assert running_at >= holder_done  # it ran only once the holder's set had ended
    poll(lambda: client.get("/locks").json() == {"held": [], "waiting": []}, what="release")
    logs = "\n".join(p.read_text() for p in (data / "logs").rglob("*.log"))
    assert "token is lq_" not in logs  # the set's token is masked in every log


def test_a_task_without_wait_is_refused_while_another_set_holds_the_lock(server, tmp_path):
    client, _data, env = server
    holder = lab_with_a_holder(env, tmp_path)
    poll(lambda: client.get("/locks").json()["held"], what="the lock to be held")
    trier = submit(
        env,
        tmp_path / "trier.yaml",
        "recipe_sets:\n  - recipes:\n      - tasks:\n          - name: try\n"
        f"            run: '{labq_command()[0]} lock acquire storage:nfs1'\n",
    )
    result = wait_for(client, trier)
    assert result["result"] == "fail"  # the command exited 1: the lock was not free
    release(tmp_path)
    assert wait_for(client, holder)["state"] == "completed"
    # a user's own token may not take locks; only a set's token (or an admin naming a set)
    user_try = cli(env, "lock", "acquire", "storage:nfs1")
    assert user_try.returncode != 0
    assert "say which recipe set" in user_try.stderr
