"""Reserved and loaned systems (issue 14) through a real ``labq server``: ``<reservesys>``
keeps a recipe's system for its owner and gives it back on time; a reserved system is not
scheduled; reserve/loan/release permissions."""

from __future__ import annotations

import json
import time

from tests.acceptance.conftest import cli, wait_for

RESERVESYS = """
whiteboard: keeps its system (Beaker's <reservesys duration="8"/>)
recipe_sets:
  - recipes:
      - host: {fqdn: a.lab1}
        metadata: {reservesys: {duration: 8, when: always}}
        tasks:
          - {name: hello, run: 'true', timeout: 30}
"""
QUICK = """
whiteboard: waits for the reserved system
recipe_sets:
  - recipes:
      - host: {fqdn: a.lab1}
        tasks:
          - {name: hello, run: 'true', timeout: 30}
"""


def _ok(result):
    assert result.returncode == 0, result.stderr
    return result


def _submit(env, tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return json.loads(_ok(cli(env, "job", "submit", str(path), "--json")).stdout)["id"]


def _held(client, fqdn):
    return client.get(f"/systems/{fqdn}").json()["reservation"]


def _until(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError("timed out")


def _as(env, token):
    return {**env, "LABQ_TOKEN": token}


def _user(env, name):
    _ok(cli(env, "user", "add", name))
    made = cli(env, "token", "create", f"{name}-cli", "--user", name, "--json")
    return _as(env, json.loads(_ok(made).stdout)["secret"])


def test_reservesys_keeps_the_system_then_the_queue_gets_it_on_time(server, tmp_path):
    client, _, env = server
    _ok(cli(env, "lab", "add", "lab1"))
    _ok(cli(env, "system", "add", "a.lab1", "--lab", "lab1"))
    kept = _submit(env, tmp_path, "kept.yaml", RESERVESYS)
    assert wait_for(client, kept, timeout=60)["state"] in ("completed", "aborted")
    held = _until(lambda: _held(client, "a.lab1"))
    assert (held["holder"], held["kind"]) == ("admin", "reserve")
    ended = time.monotonic()
    listed = _ok(cli(env, "system", "list")).stdout
    assert "reserved by admin until" in listed
    waiting = _submit(env, tmp_path, "quick.yaml", QUICK)
    time.sleep(1)
    state = client.get(f"/jobs/{waiting}/results").json()["state"]
    assert state in ("new", "queued"), state  # not scheduled on a reserved system
    assert wait_for(client, waiting, timeout=30)["state"] == "completed"
    assert _held(client, "a.lab1") is None
    assert 6.5 <= time.monotonic() - ended <= 20  # released by the timer, not a minute later


def test_reserve_loan_and_release_with_their_permissions(server, tmp_path):
    client, _, env = server
    _ok(cli(env, "lab", "add", "lab1"))
    _ok(cli(env, "system", "add", "a.lab1", "--lab", "lab1"))
    alice, bob = _user(env, "alice"), _user(env, "bob")
    queued = json.loads(
        _ok(cli(alice, "system", "reserve", "a.lab1", "--for", "1h", "--json")).stdout
    )
    assert queued["for"] == 3600
    assert wait_for(client, queued["job"], timeout=60)["state"] == "completed"
    held = _until(lambda: _held(client, "a.lab1"))
    assert held["holder"] == "alice"
    again = cli(bob, "system", "reserve", "a.lab1")
    assert again.returncode != 0
    assert "already reserved by alice" in again.stderr
    refused = cli(bob, "system", "release", "a.lab1")
    assert refused.returncode != 0
    assert "only they or an admin" in refused.stderr
    assert "released a.lab1" in _ok(cli(alice, "system", "release", "a.lab1")).stdout
    nobody = cli(bob, "system", "loan", "a.lab1", "--to", "bob")
    assert nobody.returncode != 0
    assert "admin" in nobody.stderr
    bad = cli(env, "system", "loan", "a.lab1", "--to", "bob", "--for", "soon")
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1
    assert "--for" in bad.stderr
    loaned = json.loads(_ok(cli(env, "system", "loan", "a.lab1", "--to", "bob", "--json")).stdout)
    assert (loaned["kind"], loaned["holder"], loaned["until"]) == ("loan", "bob", None)
    listed = json.loads(_ok(cli(env, "system", "reservations", "--json")).stdout)
    assert [r["holder"] for r in listed["reservations"]] == ["bob"]
    waiting = _submit(env, tmp_path, "quick.yaml", QUICK)
    time.sleep(1.5)
    assert client.get(f"/jobs/{waiting}/results").json()["state"] in ("new", "queued")
    _ok(cli(env, "system", "release", "a.lab1"))  # an admin may release anyone's
    assert wait_for(client, waiting, timeout=30)["state"] == "completed"
