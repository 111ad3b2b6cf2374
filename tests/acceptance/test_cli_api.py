"""The ``labq`` command line against a real ``labq server``, every API command once."""

from __future__ import annotations

import json
import os
import stat

import pytest

from tests.acceptance.conftest import free_port

PASSING = """
whiteboard: cli passes
recipe_sets:
  - max_time: 60
    recipes:
      - tasks:
          - {name: hello, run: 'echo hi from $LABQ_FQDN > "$LABQ_LOG_DIR/hello.txt"', timeout: 9}
"""
FAILING = """
whiteboard: cli fails
recipe_sets:
  - recipes:
      - tasks:
          - {name: boom, run: 'echo going down; exit 3', timeout: 20}
"""
SLOW = """
whiteboard: cli slow
recipe_sets:
  - priority: high
    recipes:
      - host: {memory_mb: {">": 100000}}
        tasks:
          - {name: nap, run: sleep 30, timeout: 60}
"""


@pytest.fixture
def as_user(labq, live_server):
    """Run ``labq`` against the live server with a token (the admin's by default)."""

    def run(*args: str, token: str | None = None, ok: bool = True):
        env = {"LABQ_URL": live_server.url, "LABQ_TOKEN": token or live_server.token}
        result = labq(*args, env=env, timeout=30)
        if ok:
            assert result.returncode == 0, (args, result.stderr)
        return result

    return run


def data(result):
    return json.loads(result.stdout)


def one_line_refusal(result, *words: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("labq: ")
    for word in words:
        assert word in result.stderr


def test_every_command_once_with_json(as_user, tmp_path):
    run = as_user
    assert data(run("lab", "add", "lab1", "--json"))["name"] == "lab1"
    assert data(run("lab", "list", "--json"))["labs"] == [{"name": "lab1"}]
    assert data(run("pool", "add", "perf", "--json"))["name"] == "perf"
    added = data(
        run(
            "system", "add", "a.lab1", "--lab", "lab1", "--arch", "aarch64",
            "--attr", "memory_mb=8192", "--attr", "ratio=1.5", "--attr", "machine_type=smithi",
            "--pool", "perf", "--json",
        )
    )  # fmt: skip
    assert added["attributes"] == {"memory_mb": 8192, "ratio": 1.5, "machine_type": "smithi"}
    assert added["arch"] == "aarch64"
    assert added["pools"] == ["perf"]
    run("system", "add", "b.lab1", "--lab", "lab1", "--json")
    listed = data(run("system", "list", "--lab", "lab1", "--json"))["systems"]
    assert [s["fqdn"] for s in listed] == ["a.lab1", "b.lab1"]
    in_pool = data(run("system", "list", "--pool", "perf", "--json"))["systems"]
    assert [s["fqdn"] for s in in_pool] == ["a.lab1"]
    assert data(run("system", "show", "a.lab1", "--json"))["lab"] == "lab1"

    assert data(run("pool", "add-system", "perf", "b.lab1", "--json"))["changed"] is True
    assert data(run("pool", "remove-system", "perf", "b.lab1", "--json"))["changed"] is True
    assert data(run("group", "add", "qe", "--json"))["name"] == "qe"
    assert data(run("pool", "allow", "perf", "qe", "High", "--json"))["max_priority"] == "high"
    pools = data(run("pool", "list", "--json"))["pools"]
    assert pools == [
        {"name": "perf", "systems": ["a.lab1"], "restricted": True, "rules": {"qe": "high"}}
    ]
    assert data(run("pool", "revoke", "perf", "qe", "--json"))["changed"] is True

    assert data(run("user", "add", "bob", "--json")) == {
        "name": "bob",
        "admin": False,
        "groups": [],
    }
    assert data(run("group", "add-member", "qe", "bob", "--json"))["changed"] is True
    groups = {g["name"]: g["members"] for g in data(run("group", "list", "--json"))["groups"]}
    assert groups["qe"] == ["bob"]
    assert data(run("group", "remove-member", "qe", "bob", "--json"))["changed"] is True
    users = {u["name"]: u for u in data(run("user", "list", "--json"))["users"]}
    assert users["admin"]["admin"] is True
    assert users["bob"]["groups"] == []

    bob = data(run("token", "create", "bob-cli", "--user", "bob", "--json"))
    assert bob["user"] == "bob"
    assert bob["secret"].startswith("lq_")
    assert data(run("user", "me", "--json", token=bob["secret"]))["name"] == "bob"
    ci = data(run("token", "create", "ci", "--expires-in", "3600", "--json"))
    assert ci["expires_at"] is not None
    tokens = data(run("token", "list", "--json"))["tokens"]
    assert {t["name"] for t in tokens} >= {"ci"}
    assert all("secret" not in t for t in tokens)
    assert data(run("token", "revoke", str(ci["id"]), "--json"))["revoked"] is True

    # jobs: one that passes (waited for), one that waits for a big machine kept for later
    run("system", "add", "big.lab1", "--lab", "lab1", "--attr", "memory_mb=262144")
    run("system", "condition", "big.lab1", "manual", "--reason", "kept for later")
    (tmp_path / "pass.yaml").write_text(PASSING)
    (tmp_path / "slow.yaml").write_text(SLOW)
    done = data(run("job", "submit", str(tmp_path / "pass.yaml"), "--wait", "--json"))
    assert done["state"] == "completed"
    assert done["result"] == "pass"
    job_id = done["id"]
    slow = data(run("job", "submit", str(tmp_path / "slow.yaml"), "--json"))["id"]
    page = data(run("job", "list", "--owner", "admin", "--limit", "1", "--offset", "1", "--json"))
    assert page["total"] == 2
    assert [j["id"] for j in page["jobs"]] == [job_id]
    assert data(run("job", "list", "--state", "completed", "--json"))["total"] == 1
    assert data(run("job", "list", "--group", "qe", "--json"))["total"] == 0
    assert data(run("job", "show", str(job_id), "--json"))["whiteboard"] == "cli passes"
    results = data(run("job", "results", str(job_id), "--json"))
    assert results["sets"][0]["recipes"][0]["tasks"][0]["result"] == "pass"
    logs = data(run("job", "logs", str(job_id), "--json"))["logs"]
    files = [f for row in logs for f in row["files"]]
    hello = next(f for f in files if f.endswith("hello.txt"))
    text = run("job", "logs", str(job_id), hello).stdout
    assert text.startswith("hi from ")
    assert data(run("job", "logs", str(job_id), hello, "--json"))["text"] == text

    queued = data(run("queue", "--json"))["queue"]
    assert [row["job_id"] for row in queued] == [slow]
    assert queued[0]["waits_for"] == "every matching system is manual: big.lab1"
    assert data(run("job", "priority", str(slow), "low", "--json"))["priority"] == "low"

    # bob may not cancel the admin's job: the server's words, one line, no traceback
    refused = run("job", "cancel", str(slow), token=bob["secret"], ok=False)
    one_line_refusal(refused, "may not change it", "bob")
    assert data(run("job", "cancel", str(slow), "--json"))["cancelled"] == 1

    changed = data(run("system", "condition", "b.lab1", "broken", "--reason", "disk", "--json"))
    assert changed["condition"] == "broken"
    assert changed["condition_reason"] == "disk"
    history = data(run("system", "history", "b.lab1", "--json"))["history"]
    assert history[-1]["condition"] == "broken"


def test_tables_without_json(as_user):
    as_user("lab", "add", "lab1")
    as_user("system", "add", "a.lab1", "--lab", "lab1", "--attr", "memory_mb=1024")
    out = as_user("system", "list").stdout
    assert "a.lab1" in out
    assert "memory_mb=1024" in out
    token = as_user("token", "create", "shown-once").stdout.strip().splitlines()
    assert token[-1].startswith("lq_")
    assert "lq_" not in as_user("token", "list").stdout
    # an empty queue asked without a filter is not "filtered"
    assert "no set waits" in as_user("queue").stdout
    assert "(filtered)" not in as_user("queue").stdout
    assert "no set waits (filtered)" in as_user("queue", "--owner", "nobody").stdout


def test_submit_wait_exit_codes(as_user, tmp_path):
    as_user("lab", "add", "lab1")
    as_user("system", "add", "a.lab1", "--lab", "lab1")
    (tmp_path / "pass.yaml").write_text(PASSING)
    (tmp_path / "fail.yaml").write_text(FAILING)
    passed = as_user("job", "submit", "--wait", str(tmp_path / "pass.yaml"))
    assert "completed: pass" in passed.stdout
    failed = as_user("job", "submit", "--wait", str(tmp_path / "fail.yaml"), ok=False)
    assert failed.returncode == 1, failed.stderr
    assert "fail" in failed.stdout.splitlines()[-1]
    assert "Traceback" not in failed.stderr


def test_bad_input_is_one_plain_line(as_user, tmp_path):
    missing = as_user("job", "submit", str(tmp_path / "nope.yaml"), ok=False)
    one_line_refusal(missing, "nope.yaml")
    (tmp_path / "bad.yaml").write_text("recipe_sets:\n  - priority: hihg\n    recipes: []\n")
    bad = as_user("job", "submit", str(tmp_path / "bad.yaml"), ok=False)
    one_line_refusal(bad, "bad.yaml:2", "recipe_sets[0].priority", "hihg")
    as_user("lab", "add", "lab1")
    as_user("system", "add", "a.lab1", "--lab", "lab1")
    unknown = as_user("system", "condition", "a.lab1", "wonky", "--reason", "x", ok=False)
    one_line_refusal(unknown, "unknown condition 'wonky'")
    nobody = as_user("system", "show", "nobody.lab1", ok=False)
    one_line_refusal(nobody, "nobody.lab1")
    (tmp_path / "group.yaml").write_text(PASSING + "group: nosuchgroup\n")
    unknown_group = as_user("job", "submit", str(tmp_path / "group.yaml"), ok=False)
    one_line_refusal(unknown_group, "nosuchgroup")


def test_no_server_running(labq):
    url = f"http://127.0.0.1:{free_port()}"
    result = labq("lab", "list", env={"LABQ_URL": url, "LABQ_TOKEN": "lq_nothing"})
    one_line_refusal(result, f"cannot reach labq at {url}")


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"LABQ_TOKEN": "lq_\u2026"}, ["LABQ_TOKEN", "not an API token", "'\u2026' (U+2026)"]),
        ({"LABQ_TOKEN": "lq_abc def"}, ["LABQ_TOKEN", "character 7 is ' '"]),
        ({"LABQ_URL": "http://\u2026:8080"}, ["LABQ_URL", "not a labq server URL"]),
        ({"LABQ_URL": "127.0.0.1:8080"}, ["LABQ_URL", "expected http://HOST:PORT"]),
    ],
    ids=["placeholder-token", "token-with-space", "placeholder-url", "url-without-scheme"],
)
def test_a_pasted_placeholder_is_refused_in_one_line(labq, env, words):
    # the README once printed `LABQ_TOKEN=lq_…`: as pasted, it was an internal error (rc 70)
    settings = {"LABQ_URL": f"http://127.0.0.1:{free_port()}", "LABQ_TOKEN": "lq_x", **env}
    result = labq("job", "list", env=settings)
    one_line_refusal(result, *words)
    assert result.returncode == 2
    assert "internal error" not in result.stderr


def test_a_token_in_the_client_file_is_checked_too(labq, tmp_path):
    folder = tmp_path / "home" / ".config" / "labq"
    folder.mkdir(parents=True)
    config = folder / "client.yaml"
    config.write_text("url: http://127.0.0.1:9\ntoken: lq_\u2026\n", encoding="utf-8")
    os.chmod(config, stat.S_IRUSR | stat.S_IWUSR)
    result = labq("job", "list")
    one_line_refusal(result, str(config), "not an API token")


def test_the_client_file_and_its_permissions(labq, live_server, tmp_path):
    folder = tmp_path / "home" / ".config" / "labq"
    folder.mkdir(parents=True)
    config = folder / "client.yaml"
    config.write_text(f"url: {live_server.url}\ntoken: {live_server.token}\n")
    os.chmod(config, 0o644)
    loose = labq("user", "me")
    one_line_refusal(loose, "chmod 600")
    assert live_server.token not in loose.stderr
    os.chmod(config, stat.S_IRUSR | stat.S_IWUSR)
    me = labq("user", "me", "--json")
    assert me.returncode == 0, me.stderr
    assert json.loads(me.stdout)["name"] == "admin"
    no_token = labq("user", "me", env={"LABQ_TOKEN": ""}, timeout=30)
    assert no_token.returncode == 0, no_token.stderr  # an empty variable: the file's token
    wrong = labq("--token", "lq_wrong", "user", "me")
    one_line_refusal(wrong, "token")
